// Timers that outlive the request that set them. A timer keeps the async context it was made
// in (every AsyncLocalStorage store: Crawlee's crawling context, with its request, response
// and body) alive until it fires or is cleared. A lease's renewal timer, set by the request
// that took the lease and due 200 s later, held a whole request and response per live lease:
// about 10 MiB more heap in a crawl, and the collector's and kernel's work that comes with it
// (docs/benchmarks.md). These timers run in the context the integration was made in instead.
import { AsyncResource } from 'node:async_hooks';

export class DetachedTimers {
  private readonly scope = new AsyncResource('ProxyOperatorTimers');
  private closed = false;

  /** setTimeout, unref'd, in the context this was made in rather than the caller's. */
  schedule(callback: () => void, ms: number): NodeJS.Timeout {
    const timer = this.scope.runInAsyncScope(() => setTimeout(callback, ms));
    timer.unref();
    return timer;
  }

  /**
   * Ends the scope once its owner is done (its timers are the owner's to clear): async_hooks'
   * destroy fires for it, so a hunt for leaked handles (jest --detectOpenHandles) does not
   * report a closed integration as open. Idempotent.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.scope.emitDestroy();
  }
}
