// The target of a request as the book keys cooldowns: the book's one canonical form
// (book/target-name.ts: the host name, lower-cased, without port, trailing dot or IPv6
// brackets; client/src/crawlee/host-names.ts keys the same way), so a ban reported through
// the API and one reported by the gateway land on the same entry.
import { targetName } from '../book/target-name.js';

/** The host of a CONNECT authority (`host:port`, `[v6]:port`); undefined when malformed. */
export function connectAuthority(authority: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]\s/@]+):(\d{1,5})$/.exec(authority);
  if (m === null) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  return { host: m[1], port };
}

/** The canonical target of a host (with or without brackets); undefined when it is not one. */
export function canonicalTarget(host: string): string | undefined {
  const named = targetName(host);
  return named.ok ? named.target : undefined;
}
