// Proxy URLs as Crawlee describes them to its HTTP clients, parsed once per URL.
import type { ProxyInfo } from '@crawlee/core';

/**
 * A ProxyInfo that keeps the lease carrying its request. Crawlee hands the same object back
 * to the post-navigation hook, which then counts the response on that lease without looking
 * it up (in a crawl's cold caches each lookup is a cache miss: docs/benchmarks.md). The lease
 * is in a private field: whoever reads, copies, compares or logs the info never sees it.
 */
class CarryingProxyInfo implements ProxyInfo {
  readonly #carrier: unknown;
  readonly proxyTier = undefined;

  constructor(
    readonly sessionId: string | undefined,
    readonly url: string,
    readonly username: string,
    readonly password: string,
    readonly hostname: string,
    readonly port: string,
    carrier: unknown,
  ) {
    this.#carrier = carrier;
  }

  static carrierOf(info: object | undefined): unknown {
    return info !== undefined && #carrier in info ? info.#carrier : undefined;
  }
}

/** The lease a ProxyInfo from ProxyInfos carries, if any. */
export function carrierOf<C>(info: object | undefined): C | undefined {
  // Only a lease manager's own leases ride on its ProxyInfos (ProxyInfos.of's callers).
  return CarryingProxyInfo.carrierOf(info) as C | undefined;
}

/**
 * What Crawlee's newProxyInfo returns for a proxy URL, parsed once per URL: a fleet has a few
 * hundred proxies and a crawl sends thousands of requests through each. Remembers up to
 * `capacity` URLs (then starts over).
 */
export class ProxyInfos {
  private readonly parsed = new Map<
    string,
    { username: string; password: string; hostname: string; port: string }
  >();

  constructor(private readonly capacity = 4096) {}

  /** The ProxyInfo of `url` for one request of `sessionId`, carrying `carrier` when given. */
  of(url: string, sessionId: string | undefined, carrier?: unknown): ProxyInfo {
    let parts = this.parsed.get(url);
    if (parts === undefined) {
      const { username, password, hostname, port } = new URL(url);
      parts = {
        username: decodeURIComponent(username),
        password: decodeURIComponent(password),
        hostname,
        port,
      };
      if (this.parsed.size >= this.capacity) this.parsed.clear();
      this.parsed.set(url, parts);
    }
    const { username, password, hostname, port } = parts;
    return new CarryingProxyInfo(sessionId, url, username, password, hostname, port, carrier);
  }
}
