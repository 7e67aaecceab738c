// Which lease each (session, target host) uses: looked up on every request and every response.
// Keyed by host, then by session, rather than by one key joining the two: Crawlee hands over
// the same session id string on every request and HostNames the same host string, so a lookup
// hashes nothing new, where a joined key was a new string to hash per call (the largest single
// cost of the integration's per-request path: docs/benchmarks.md).

/** A session or host as a key: undefined (no session, no host) is the empty string. */
export function slotOf(name: string | undefined): string {
  return name ?? '';
}

export class Bindings<T> {
  private readonly byHost = new Map<string, Map<string, T>>();

  get(session: string | undefined, host: string | undefined): T | undefined {
    return this.byHost.get(slotOf(host))?.get(slotOf(session));
  }

  set(session: string | undefined, host: string | undefined, value: T): void {
    const key = slotOf(host);
    let sessions = this.byHost.get(key);
    if (sessions === undefined) this.byHost.set(key, (sessions = new Map()));
    sessions.set(slotOf(session), value);
  }

  /** Unbinds the session from the host if it is bound to `value` (a later binding stays). */
  deleteIf(session: string | undefined, host: string | undefined, value: T): void {
    const key = slotOf(host);
    const sessions = this.byHost.get(key);
    if (sessions === undefined || sessions.get(slotOf(session)) !== value) return;
    sessions.delete(slotOf(session));
    if (sessions.size === 0) this.byHost.delete(key);
  }

  /** What `session` is bound to, for every host. */
  ofSession(session: string): T[] {
    const found: T[] = [];
    for (const sessions of this.byHost.values()) {
      const value = sessions.get(session);
      if (value !== undefined) found.push(value);
    }
    return found;
  }
}
