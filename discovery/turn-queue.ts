// Lets list pages take turns with everything else on the event loop. Node runs every request
// that is ready in one poll phase before it looks at timers again: 32 clients listing at once
// meant 32 pages back to back, and the health engine's probe timers waited behind all of
// them. A page waits for its turn here: one turn per loop iteration (setImmediate), so timers
// run between any two pages, whatever the number of clients.
export class TurnQueue {
  private readonly waiting: (() => void)[] = [];
  private scheduled = false;

  /** Resolves when it is this caller's turn (in a later loop iteration's check phase). */
  turn(): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.schedule();
    });
  }

  get length(): number {
    return this.waiting.length;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      // The caller's continuation runs in this check phase's microtasks; the next turn is
      // an immediate queued now, which Node runs in the next iteration, after its timers.
      this.waiting.shift()?.();
      if (this.waiting.length > 0) this.schedule();
    });
  }
}
