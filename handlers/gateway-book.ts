// The gateway's ports (gateway/ports.ts) on the lease book's store and named tokens (book/):
// the gateway owns the interfaces it needs, the book knows nothing of the gateway, and the
// discovery API is not involved (gateway/ and discovery/ never import each other; the one
// cooldowns-by-target counter both doors count in is handed to each from here).
import type { ProxyCatalog, ProxyRecord } from '../book/catalog.js';
import { isOpen, OPEN_POLICY, scopeMatcher, type TokenPolicy } from '../book/token-scope.js';
import { CooldownQuotaRefusal, type LeaseStore } from '../book/lease-store.js';
import { tokenDigest, type ApiTokens } from '../book/api-tokens.js';
import type { TenantLedger } from '../book/tenant-quotas.js';
import type { Logger } from 'pino';
import type { TargetCooldownMetrics } from '../discovery/target-cooldown-metrics.js';
import { SourceLimiter } from '../discovery/source-limiter.js';
import type {
  GatewayBook,
  GatewayLeaseRequest,
  GatewayLeaseResult,
  TokenVerifier,
} from '../gateway/ports.js';

/**
 * Told of each cooldown a gateway report started (the target it applied to; the
 * process's cooldowns-by-target metric counts it, as the API counts its clients' reports).
 */
export type CooldownListener = (target: string | undefined, proxyID: string, owner: string) => void;

/**
 * The process's fair share of the book among tokens (discovery/book-turns.ts): the gateway's
 * calls take their turns with the API's, so neither door lets one token's backlog delay
 * another's calls. They wait, never refused: the gateway's own numbers bound them (one call
 * per client connection or held lease).
 */
export interface BookShare {
  inTurn<T>(token: string, operation: () => Promise<T>): Promise<T>;
}

const NO_SHARE: BookShare = { inTurn: (_token, operation) => operation() };

/**
 * `policyOf` gives a token name's scope (the tokens file's): the gateway leases only proxies
 * inside it, as the API does, so a scoped token reaches no other team's proxies through it.
 * `ledger` keeps the per-token quotas (book/tenant-quotas.ts) for the gateway's leases,
 * sessions and cooldowns as the API keeps them for its own (the same ledger where both doors
 * run in one process): without it a token took, through the gateway, every slot of the fleet,
 * sessions enough for the book to evict another team's, and cooldowns up to the book's cap.
 */
export function gatewayBook(
  store: LeaseStore,
  catalog: ProxyCatalog,
  policyOf: (owner: string) => TokenPolicy = () => OPEN_POLICY,
  onCooldown: CooldownListener = () => {},
  share: BookShare = NO_SHARE,
  ledger?: TenantLedger,
  clock: () => number = Date.now,
): GatewayBook {
  // Per scope: a scoped token's unknown-option error lists only the keys of its own proxies.
  type Keys = { version: number; keys: ReadonlySet<string> };
  let openKeys: Keys | undefined;
  const scopedKeys = new WeakMap<TokenPolicy, Keys>();
  const scopes = new WeakMap<TokenPolicy, (proxy: ProxyRecord) => boolean>();
  const scopeOf = (owner: string): ((proxy: ProxyRecord) => boolean) | undefined => {
    const policy = policyOf(owner);
    if (isOpen(policy.scope)) return undefined;
    let admits = scopes.get(policy);
    if (admits === undefined) scopes.set(policy, (admits = scopeMatcher(policy.scope)));
    return admits;
  };
  return {
    async lease(r: GatewayLeaseRequest): Promise<GatewayLeaseResult> {
      const within = scopeOf(r.owner);
      // A new session beyond the token's quota ends its own least recently used, never another's.
      const evict = r.session === undefined ? undefined : ledger?.useSession(r.owner, r.session, clock());
      if (evict !== undefined) await share.inTurn(r.owner, () => store.endSession(evict, r.owner));
      const result = await share.inTurn(r.owner, () =>
        store.acquire({
          selector: { ...r.selector },
          ttlSeconds: r.ttlSeconds,
          target: r.target,
          owner: r.owner,
          // Judged by the book with the grant, as for the API's leases (one count for both doors
          // and, on Redis, every replica).
          ...(ledger === undefined ? {} : { leaseQuota: ledger.limits.leases }),
          ...(r.session === undefined ? {} : { session: r.session }),
          ...(within === undefined ? {} : { within }),
        }),
      );
      if (!result.granted && result.reason === 'lease_quota')
        return { granted: false, reason: 'lease_quota', retryAfterMs: 1000 };
      if (!result.granted)
        return {
          granted: false,
          reason: result.reason,
          ...(result.retryAfterMs === undefined ? {} : { retryAfterMs: result.retryAfterMs }),
        };
      const { proxy } = result.lease;
      return {
        granted: true,
        leaseID: result.lease.id,
        upstream: {
          id: proxy.id,
          host: proxy.ip,
          port: proxy.port,
          // Read at each connection, not at the grant: a held lease outlives a rotation of the
          // proxy's Secret, and its stale password got a 407, reported unreachable (a healthy
          // proxy made suspect for every team, the session moved off its exit).
          get credentials() {
            return catalog.get(proxy.id)?.credentials ?? proxy.credentials;
          },
          ...(proxy.guarded === true ? { guarded: true } : {}),
        },
        sessionMoved: result.session?.moved ?? false,
      };
    },
    async renew(leaseID, ttlSeconds, owner) {
      return (await share.inTurn(owner, () => store.renew(leaseID, ttlSeconds, owner))) !== undefined;
    },
    async release(leaseID, owner) {
      await share.inTurn(owner, () => store.release(leaseID, owner));
    },
    async endSession(session, owner) {
      await share.inTurn(owner, () => store.endSession(session, owner));
      ledger?.sessionEnded(owner, session);
    },
    async report(leaseID, result, details, owner) {
      // A new (proxy, target) cooldown beyond the token's quota is refused by the book, as for
      // the API's reports: one team cannot fill the book's cap and switch bans off for every team.
      const quota = ledger === undefined ? {} : { cooldownQuota: ledger.limits.cooldowns };
      // Every gateway report comes through here (plain-HTTP bans, tunnel clients' session
      // reports): each cooldown it starts is counted once, and never by the API as well.
      let outcome;
      try {
        outcome = await share.inTurn(owner, () =>
          store.report(leaseID, result, { ...details, ...quota }, owner),
        );
      } catch (err) {
        if (err instanceof CooldownQuotaRefusal) return 'cooldown_quota';
        throw err;
      }
      // Its own targets (target-privacy.ts): the book's reporters say it too.
      if (outcome?.cooldownUntil !== undefined)
        ledger?.cooldownRecorded(
          owner,
          outcome.lease.proxyID,
          outcome.target ?? '',
          outcome.cooldownUntil.getTime(),
        );
      if (outcome?.cooldownStarted === true && outcome.replayed !== true)
        onCooldown(outcome.target, outcome.lease.proxyID, owner);
    },
    attributeKeys(owner) {
      // Recomputed only when the catalog changed: a username is parsed on every request.
      const policy = policyOf(owner);
      const within = scopeOf(owner);
      let cached = within === undefined ? openKeys : scopedKeys.get(policy);
      if (cached === undefined || cached.version !== catalog.version()) {
        const next = new Set<string>();
        for (const record of catalog.records())
          if (within === undefined || within(record))
            for (const key of Object.keys(record.attributes)) next.add(key);
        cached = { version: catalog.version(), keys: next };
        if (within === undefined) openKeys = cached;
        else scopedKeys.set(policy, cached);
      }
      return cached.keys;
    },
  };
}

/** Recently presented tokens whose digests are kept (clients resend the same token). */
const DIGEST_CACHE_ENTRIES = 64;

/**
 * The named tokens as the gateway asks them; `tokens` undefined = none configured (refuse all).
 * Wrong tokens are limited per source address as the discovery API limits them (`sources`).
 */
export function gatewayTokens(
  tokens: ApiTokens | undefined,
  sources: SourceLimiter = new SourceLimiter(),
): TokenVerifier {
  const digests = new Map<string, string>();
  return {
    configured: () => tokens !== undefined && tokens.names.length > 0,
    names: () => new Set(tokens?.names ?? []),
    // A token seen before is known without hashing: a valid client behind a guessing
    // address resends its own and is never refused.
    throttled(token, source) {
      const known = digests.get(token);
      if (known !== undefined && tokens?.nameOf(known) !== undefined) return undefined;
      return sources.blocked(source);
    },
    failed: (source) => sources.failed(source),
    nameOf(token) {
      if (tokens === undefined) return undefined;
      let digest = digests.get(token);
      if (digest === undefined) {
        digest = tokenDigest(token);
        if (digests.size >= DIGEST_CACHE_ENTRIES) digests.delete(digests.keys().next().value!);
        digests.set(token, digest);
      }
      return tokens.nameOf(digest);
    },
  };
}

/**
 * The gateway's own bans counted where the API's clients' are (one series per target, door
 * "gateway"), with the debug line that gives the SRE the way from the label to the site.
 */
export function gatewayCooldowns(metrics: TargetCooldownMetrics, logger: Logger): CooldownListener {
  return (target, proxyID, owner) => {
    metrics.countCooldown(target, 'gateway');
    logger.debug(
      { owner, proxyID, target: target ?? null, metricsLabel: metrics.labelOf(target) },
      'proxy cooling down',
    );
  };
}
