// TLS sessions kept between probes, so a probe can resume instead of paying a full handshake.

/** What the prober needs from a session store (the prober owns the interface; tests poison it). */
export interface TlsSessionStore {
  /** The session the last good probe of `key` got from `endpoint`, if any. */
  take(key: string, endpoint: string): Buffer | undefined;
  remember(key: string, endpoint: string, session: Buffer): void;
  forget(key: string): void;
  readonly size: number;
}

/**
 * One session per proxy: keyed by the proxy, not by the target, so the target never sees one
 * ticket arrive through two proxies (a shared ticket would link the fleet's exits to each
 * other). `endpoint` (proxy address + probe origin) guards against a moved proxy or probe URL
 * resuming a session negotiated for another path. Bounded by the fleet: the engine releases
 * a key when its proxy is removed or its endpoint changes.
 */
export class TlsSessionBook implements TlsSessionStore {
  private readonly sessions = new Map<string, { endpoint: string; session: Buffer }>();

  take(key: string, endpoint: string): Buffer | undefined {
    const entry = this.sessions.get(key);
    return entry?.endpoint === endpoint ? entry.session : undefined;
  }

  remember(key: string, endpoint: string, session: Buffer): void {
    this.sessions.set(key, { endpoint, session });
  }

  forget(key: string): void {
    this.sessions.delete(key);
  }

  get size(): number {
    return this.sessions.size;
  }
}
