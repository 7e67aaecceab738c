// The interfaces the gateway owns: what it needs of a lease book and of a token list. The
// handlers layer wires them to the book's LeaseStore and named tokens (book/), so the gateway
// imports nothing of the API (nor the API anything of the gateway).
import type { LookupFunction } from 'node:net';

/** An upstream forward proxy a lease grants, with the credentials the gateway adds itself. */
export interface Upstream {
  /** namespace/name: the book's proxy id. */
  readonly id: string;
  readonly host: string;
  readonly port: number;
  readonly credentials?: { readonly username: string; readonly password: string };
  /** An External proxy: every connection to it passes the UpstreamGuard first. */
  readonly guarded?: boolean;
}

/**
 * Where the gateway may connect to a `guarded` upstream (issue 44 item 5). handlers/ wires the
 * providers config's endpoint rule through the health engine's own guarded lookup, so one rule
 * decides for the probes and the gateway.
 */
export interface UpstreamGuard {
  /** Why a host (an address, or a name such as localhost) may not be connected to, or undefined. */
  refusal(host: string): string | undefined;
  /**
   * net's lookup for a guarded name: it checks every address the name resolves to, on the
   * resolution the connection uses (DNS rebinding), and calls back with an error whose `code`
   * is UPSTREAM_REFUSED_CODE (upstream-guard.ts) when one is refused.
   */
  readonly lookup: LookupFunction;
}

export interface GatewayLeaseRequest {
  /** The token name: the lease's owner (sessions and caps per owner, as on the API). */
  owner: string;
  selector: Readonly<Record<string, string>>;
  /** Canonical target (target.ts). */
  target: string;
  /** The book's session key; undefined = least-loaded. */
  session?: string;
  ttlSeconds: number;
}

/** lease_quota: the token holds its quota of live leases (book/tenant-quotas.ts), the fleet may have room. */
export type GatewayNoLease = 'no_match' | 'all_busy' | 'all_cooling_down' | 'lease_quota';

export type GatewayLeaseResult =
  | { granted: true; leaseID: string; upstream: Upstream; sessionMoved: boolean }
  | { granted: false; reason: GatewayNoLease; retryAfterMs?: number };

/** What the gateway reports about a lease's proxy, as the API's report results. */
export type GatewayReport = 'banned' | 'rate_limited' | 'unreachable';

/** The lease book as the gateway uses it (a subset of the book's LeaseStore, in its own terms). */
export interface GatewayBook {
  lease(request: GatewayLeaseRequest): Promise<GatewayLeaseResult>;
  /** False when the lease is gone (expired, released, its proxy deleted). */
  renew(leaseID: string, ttlSeconds: number, owner: string): Promise<boolean>;
  release(leaseID: string, owner: string): Promise<void>;
  /** 'cooldown_quota': refused, nothing recorded (the token keeps its quota of cooldowns running). */
  report(
    leaseID: string,
    result: GatewayReport,
    details: { target: string; retryAfterSeconds?: number },
    owner: string,
  ): Promise<void | 'cooldown_quota'>;
  /** Forgets a session's binding (the owner's), so its next lease is chosen afresh. */
  endSession(session: string, owner: string): Promise<void>;
  /**
   * Attribute keys some proxy inside the owner's scope carries now: what its username may select
   * on (an unknown option's error lists them, so never another team's).
   */
  attributeKeys(owner: string): ReadonlySet<string>;
}

/** Resolves a presented token (the API's and the gateway's) to its name, or undefined. Read live (reloads apply). */
export interface TokenVerifier {
  /** Undefined when no token is configured at all (the gateway then refuses everyone). */
  configured(): boolean;
  nameOf(token: string): string | undefined;
  /** The names of the tokens valid now: a tunnel whose token was revoked since it opened is cut. */
  names(): ReadonlySet<string>;
  /**
   * Milliseconds `source` must wait before its next token is checked (it presented too many
   * wrong ones), or undefined; a token already seen valid passes. Asked before nameOf, so a
   * guesser is refused before its token is hashed. Without it, no limit.
   */
  throttled?(token: string, source: string): number | undefined;
  /** `source` presented a token nameOf did not know. */
  failed?(source: string): void;
}
