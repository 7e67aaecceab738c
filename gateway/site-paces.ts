// Every (upstream, target) pace of this gateway replica (site-pace.ts), in its memory only:
// with several replicas each keeps its own, as each Crawlee process keeps its own. A pair not
// used for FORGET_AFTER_MS is forgotten (memory stays bounded by the pairs in use; a site's
// limit may have changed by then), so is what a target taught every upstream.
import { adopt, hasRoom, rateLimited, reserve, succeeded, UNPACED, type Pace } from './site-pace.js';

/** A pair (or a target's learned pace) unused this long is forgotten. */
export const FORGET_AFTER_MS = 120_000;
const SWEEP_EVERY_MS = 30_000;

interface Cell {
  pace: Pace;
  usedAt: number;
}

/** How a request's wait for its turn ended. */
export type TurnOutcome =
  /** Its turn came: send it now (`heldMs` > 0 when the pace held it). */
  | { kind: 'go'; heldMs: number }
  /** Its turn would come after its deadline: `waitMs` from now. Nothing was reserved. */
  | { kind: 'past_deadline'; waitMs: number; heldMs: number }
  /** The client left while it waited. */
  | { kind: 'client_gone'; heldMs: number };

export class SitePaces {
  private readonly cells = new Map<string, Cell>();
  /** target → the latest pace a 429 taught any upstream for it, and when. */
  private readonly learned = new Map<string, Cell>();
  private sweptAt: number;

  constructor(private readonly now: () => number = Date.now) {
    this.sweptAt = now();
  }

  /** Pairs and targets held (for the bound's test). */
  get size(): number {
    return this.cells.size + this.learned.size;
  }

  /** The pace of the pair now (adopting the target's learned one when it has none). */
  paceOf(upstream: string, target: string): Pace {
    return this.cell(upstream, target, this.now()).pace;
  }

  /** Whether a request through `upstream` to `target` may go now. */
  hasRoom(upstream: string, target: string): boolean {
    const cell = this.cells.get(key(upstream, target));
    // A pair without a cell has sent nothing: unpaced, or adopting a pace with a turn now.
    return cell === undefined || hasRoom(cell.pace, this.now());
  }

  /**
   * Waits for the request's turn through `upstream` to `target`, reserved in order; a 429
   * meanwhile voids the reservation and it reserves again. A turn past `deadline` (ms) is not
   * taken.
   */
  async turn(
    upstream: string,
    target: string,
    deadline: number,
    clientGone: () => boolean,
  ): Promise<TurnOutcome> {
    const started = this.now();
    for (;;) {
      const now = this.now();
      const cell = this.cell(upstream, target, now);
      const turn = reserve(cell.pace, now);
      const heldMs = now - started;
      if (turn.at > deadline) return { kind: 'past_deadline', waitMs: turn.at - now, heldMs };
      cell.pace = turn.pace;
      if (turn.at <= now) return { kind: 'go', heldMs };
      const epoch = cell.pace.limitedAt;
      await new Promise((r) => setTimeout(r, turn.at - now));
      if (clientGone()) return { kind: 'client_gone', heldMs: this.now() - started };
      // The reservation stands unless a 429 taught the pace since (a new rest, a new rate).
      if (this.cells.get(key(upstream, target))?.pace.limitedAt === epoch)
        return { kind: 'go', heldMs: this.now() - started };
    }
  }

  /** The site answered a request sent at `sentAt` through `upstream` with anything but a rate limit. */
  succeeded(upstream: string, target: string, sentAt?: number): void {
    const now = this.now();
    const cell = this.cell(upstream, target, now);
    cell.pace = succeeded(cell.pace, now, sentAt ?? now);
  }

  /**
   * The site rate-limited a request sent at `sentAt` through `upstream`. `teaches`: this 429
   * started a rest (the book is told once per rest, for `restMs`).
   */
  rateLimited(
    upstream: string,
    target: string,
    sentAt: number,
    retryAfterMs: number | undefined,
  ): { teaches: boolean; restMs: number } {
    const now = this.now();
    const cell = this.cell(upstream, target, now);
    const answer = rateLimited(cell.pace, now, sentAt, retryAfterMs);
    cell.pace = answer.pace;
    if (answer.teaches) this.learned.set(target, { pace: answer.pace, usedAt: now });
    return { teaches: answer.teaches, restMs: answer.restMs };
  }

  private cell(upstream: string, target: string, now: number): Cell {
    if (now - this.sweptAt >= SWEEP_EVERY_MS) this.sweep(now);
    const k = key(upstream, target);
    let cell = this.cells.get(k);
    if (cell === undefined) this.cells.set(k, (cell = { pace: UNPACED, usedAt: now }));
    cell.usedAt = now;
    if (cell.pace.rate === undefined) {
      const learned = this.learned.get(target);
      if (learned !== undefined) {
        learned.usedAt = now;
        cell.pace = adopt(cell.pace, learned.pace, now);
      }
    }
    return cell;
  }

  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [k, c] of this.cells) if (now - c.usedAt >= FORGET_AFTER_MS) this.cells.delete(k);
    for (const [t, c] of this.learned) if (now - c.usedAt >= FORGET_AFTER_MS) this.learned.delete(t);
  }
}

function key(upstream: string, target: string): string {
  return `${upstream}\n${target}`;
}
