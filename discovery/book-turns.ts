// The shell of the book's fair share (fair-share.ts decides): per-token FIFO queues in front
// of the book, a bounded number of operations running at once. Without it a token sending
// ~1,000 requests/s put each of them into the book (Redis, one connection) ahead of another
// token's lease: that token's calls waited behind the whole backlog.
import { admit, nextHead, startTag, type FairShareLimits } from './fair-share.js';

/** A place in the share: `ready` resolves when it runs; `leave` ends it (or drops it unrun). */
export interface Turn {
  ready: Promise<void>;
  leave(): void;
}

interface Waiter {
  start: number;
  seq: number;
  since: number;
  run(): void;
}

interface Lane {
  /** The finish tag of the token's last operation. */
  finish: number;
  queue: Waiter[];
}

export class BookTurns {
  private readonly lanes = new Map<string, Lane>();
  private running = 0;
  private waiting = 0;
  private virtualTime = 0;
  private seq = 0;

  constructor(
    readonly limits: FairShareLimits,
    /** Told how long each operation waited for its turn (ms), by token. */
    private readonly onWait: (token: string, waitMs: number) => void = () => {},
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * A turn for one operation of `token`, or 'book_queue_full' when its queue is at its bound
   * (`bounded` false: never; see admit).
   */
  enter(token: string, cost: number, bounded = true): Turn | 'book_queue_full' {
    let lane = this.lanes.get(token);
    const decision = admit(
      { inFlight: this.running, queued: this.waiting, queuedOfToken: lane?.queue.length ?? 0 },
      this.limits,
      bounded,
    );
    if (decision === 'book_queue_full') return decision;
    if (lane === undefined) this.lanes.set(token, (lane = { finish: 0, queue: [] }));
    const start = startTag(this.virtualTime, lane.finish);
    lane.finish = start + cost;
    let state: 'waiting' | 'running' | 'done' = 'waiting';
    const leave = () => {
      if (state === 'running') {
        this.running--;
        this.dispatch();
      } else if (state === 'waiting') {
        const at = lane.queue.indexOf(waiter);
        if (at !== -1) {
          lane.queue.splice(at, 1);
          this.waiting--;
        }
      }
      state = 'done';
    };
    let resolve!: () => void;
    const ready = new Promise<void>((r) => (resolve = r));
    const waiter: Waiter = {
      start,
      seq: this.seq++,
      since: this.now(),
      run: () => {
        state = 'running';
        this.running++;
        this.virtualTime = start;
        this.onWait(token, this.now() - waiter.since);
        resolve();
      },
    };
    if (decision === 'run') waiter.run();
    else {
      lane.queue.push(waiter);
      this.waiting++;
    }
    return { ready, leave };
  }

  /** Runs `operation` in a turn that always waits (never refused), ending it after. */
  async inTurn<T>(token: string, operation: () => Promise<T>): Promise<T> {
    const turn = this.enter(token, 1, false);
    if (turn === 'book_queue_full') throw new Error('an unbounded turn is never refused');
    await turn.ready;
    try {
      return await operation();
    } finally {
      turn.leave();
    }
  }

  /** Operations running now and waiting (for tests and the metrics). */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting };
  }

  private dispatch(): void {
    while (this.running < this.limits.inFlight && this.waiting > 0) {
      const lanes = [...this.lanes.values()].filter((l) => l.queue.length > 0);
      const at = nextHead(lanes.map((l) => l.queue[0]!));
      const next = lanes[at]!.queue.shift()!;
      this.waiting--;
      next.run();
    }
  }
}
