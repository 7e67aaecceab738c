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
  for (let i = start; i < url.length; i++) if (endsAuthority(url, i)) return url.slice(0, i);
  return url;
}

/** hostOf, remembered for up to `capacity` authorities (then it starts over). */
export class HostNames {
  private readonly known = new Map<string, string | undefined>();
  /** The authority and host of the last URL: a crawl's requests mostly go to one site in a row. */
  private last: { authority: string; host: string | undefined } | undefined;

  constructor(private readonly capacity = 1024) {}

  of(url: string | undefined): string | undefined {
    if (url === undefined) return undefined;
    // The same authority as the last URL, checked in place: no new string per request.
    const last = this.last;
    if (last !== undefined && url.startsWith(last.authority) && endsAuthority(url, last.authority.length)) {
      return last.host;
    }
    const authority = authorityOf(url);
    if (authority === undefined) return hostOf(url);
    let host: string | undefined;
    if (this.known.has(authority)) host = this.known.get(authority);
    else {
      host = hostOf(authority);
      if (this.known.size >= this.capacity) this.known.clear();
      this.known.set(authority, host);
    }
    this.last = { authority, host };
    return host;
  }
}

/** Whether a URL's authority ends at `at` (its end, or a `/`, `?`, `#` or `\`). */
function endsAuthority(url: string, at: number): boolean {
  if (at === url.length) return true;
  const c = url.charCodeAt(at);
  return c === 0x2f || c === 0x3f || c === 0x23 || c === 0x5c;
}
