// The target of a request as the discovery API keys cooldowns: the host name, lower-cased,
// without port or IPv6 brackets (client/src/crawlee/host-names.ts keys the same way), so a
// ban reported through the API and one reported by the gateway land on the same entry.

const MAX_TARGET_LENGTH = 253;
const HOST_PATTERN = /^[\x21-\x7e]+$/;

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
  const target = host
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '');
  if (target.length === 0 || target.length > MAX_TARGET_LENGTH || !HOST_PATTERN.test(target))
    return undefined;
  return target;
}
