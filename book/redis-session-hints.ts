/** Session → proxy bindings this replica remembers, so a sticky lease is one round trip. */
const SESSION_HINTS = 10_000;

/**
 * The sessions this replica bound (scoped keys, lease-owner.ts) and their proxies, most
 * recently used last, at most SESSION_HINTS: a hint only, the book decides.
 */
export class RedisSessionHints {
  private readonly hints = new Map<string, string>();

  get(key: string): string | undefined {
    return this.hints.get(key);
  }

  remember(key: string, proxyID: string): void {
    this.hints.delete(key);
    this.hints.set(key, proxyID);
    if (this.hints.size > SESSION_HINTS) this.hints.delete(this.hints.keys().next().value!);
  }

  forget(key: string): void {
    this.hints.delete(key);
  }
}
