// Sticky sessions: which proxy each session key is bound to. A session expires after an idle
// time; their number is capped, and at the cap starting a new session forgets the least
// recently used one (the next to expire anyway). Kept in least-recently-used order, so both
// expiry and eviction take entries from the front.

export const DEFAULT_SESSION_IDLE_SECONDS = 30 * 60;
export const DEFAULT_MAX_SESSIONS = 100_000;
/** The cap may be lowered, but never below this many sessions. */
export const MIN_MAX_SESSIONS = 10_000;

interface Binding {
  proxyID: string;
  lastUsed: number;
}

export class SessionBook {
  private readonly sessions = new Map<string, Binding>();
  evictions = 0;

  constructor(
    private readonly idleMillis: number,
    private readonly maxSessions: number,
  ) {}

  /** The proxy a live session is bound to; an idle-expired session is forgotten here. */
  boundTo(key: string, now: number): string | undefined {
    const binding = this.sessions.get(key);
    if (binding === undefined) return undefined;
    if (binding.lastUsed + this.idleMillis <= now) {
      this.sessions.delete(key);
      return undefined;
    }
    return binding.proxyID;
  }

  /** Binds (or rebinds) a session and marks it used now. */
  bind(key: string, proxyID: string, now: number): void {
    if (!this.sessions.delete(key) && this.sessions.size >= this.maxSessions) {
      this.sweep(now);
      if (this.sessions.size >= this.maxSessions) {
        this.sessions.delete(this.sessions.keys().next().value!);
        this.evictions++;
      }
    }
    this.sessions.set(key, { proxyID, lastUsed: now });
  }

  /** Marks a live session used now (a renewal of one of its leases). */
  touch(key: string, now: number): void {
    const proxyID = this.boundTo(key, now);
    if (proxyID !== undefined) this.bind(key, proxyID, now);
  }

  end(key: string): void {
    this.sessions.delete(key);
  }

  /** Forgets idle-expired sessions; returns how many are live. */
  sweep(now: number): number {
    for (const [key, binding] of this.sessions) {
      if (binding.lastUsed + this.idleMillis > now) break;
      this.sessions.delete(key);
    }
    return this.sessions.size;
  }
}
