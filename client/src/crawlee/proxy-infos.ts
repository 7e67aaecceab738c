// Proxy URLs as Crawlee describes them to its HTTP clients, parsed once per URL.
import type { ProxyInfo } from 'crawlee';

/**
 * What Crawlee's newProxyInfo returns for a proxy URL, parsed once per URL: a fleet has a few
 * hundred proxies and a crawl sends thousands of requests through each. Remembers up to
 * `capacity` URLs (then starts over).
 */
export class ProxyInfos {
  private readonly parsed = new Map<string, Omit<ProxyInfo, 'sessionId' | 'url'>>();

  constructor(private readonly capacity = 4096) {}

  of(url: string, sessionId: string | undefined): ProxyInfo {
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
    // Spelled out, not spread: this runs on every request.
    const { username, password, hostname, port } = parts;
    return { sessionId, url, username, password, hostname, port, proxyTier: undefined };
  }
}
