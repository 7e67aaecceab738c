// At most a few list requests of one token in flight. A list page is the only request whose
// cost grows with the fleet; a token with many lists open at once fills every event-loop
// iteration with pages (each still takes its turn, turn-queue.ts), and the health engine's
// probe timers wait behind them. Beyond the cap the answer is 429, cheap and at once.

/** Lists one token may have in flight by default. */
export const DEFAULT_MAX_CONCURRENT_LISTS = 4;

/** The decision alone: may a token with `inFlight` lists open start one more? */
export function mayStartList(inFlight: number, max: number): boolean {
  return inFlight < max;
}

/** Counts each token name's open lists; names only, so as many entries as tokens. */
export class ListSlots {
  private readonly inFlight = new Map<string, number>();

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new Error(`max must be an integer >= 1, got ${max}`);
  }

  /** Takes a slot for `name` if one is free; every true must be followed by one release. */
  take(name: string): boolean {
    const open = this.inFlight.get(name) ?? 0;
    if (!mayStartList(open, this.max)) return false;
    this.inFlight.set(name, open + 1);
    return true;
  }

  release(name: string): void {
    const open = (this.inFlight.get(name) ?? 0) - 1;
    if (open > 0) this.inFlight.set(name, open);
    else this.inFlight.delete(name);
  }

  open(name: string): number {
    return this.inFlight.get(name) ?? 0;
  }
}
