// The target host of a request URL, as leases, reports and paces are keyed. Parsed twice per
// request (for its proxy, then for its report): a crawl reads thousands of URLs of a few hosts,
// so the parse is remembered per scheme and authority, all a URL's host depends on.

/** The lower-cased host name of a URL (IPv6 without brackets), or undefined. */
export function hostOf(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, '').toLowerCase();
    return host === '' ? undefined : host;
  } catch {
    return undefined;
  }
}

/**
 * `http://` or `https://` and the authority after it, up to the first `/`, `?`, `#` or `\`
 * (where the URL parser ends a special scheme's authority too); undefined for anything else.
 */
export function authorityOf(url: string): string | undefined {
  const start = url.startsWith('https://') ? 8 : url.startsWith('http://') ? 7 : -1;
  if (start < 0) return undefined;
  for (let i = start; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 0x2f || c === 0x3f || c === 0x23 || c === 0x5c) return url.slice(0, i);
  }
  return url;
}

/** hostOf, remembered for up to `capacity` authorities (then it starts over). */
export class HostNames {
  private readonly known = new Map<string, string | undefined>();

  constructor(private readonly capacity = 1024) {}

  of(url: string | undefined): string | undefined {
    if (url === undefined) return undefined;
    const authority = authorityOf(url);
    if (authority === undefined) return hostOf(url);
    if (this.known.has(authority)) return this.known.get(authority);
    const host = hostOf(authority);
    if (this.known.size >= this.capacity) this.known.clear();
    this.known.set(authority, host);
    return host;
  }
}
