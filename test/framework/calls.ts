import type { Cause } from '../../framework/index.js';

export interface Call {
  cause: Cause;
  name: string;
  generation: number;
  at: number;
}

/** What the test handlers did, injected into them so tests can assert on it. */
export class Calls {
  readonly log: Call[] = [];

  record(cause: Cause, obj: { metadata: { name?: string; generation?: number } }): void {
    this.log.push({
      cause,
      name: obj.metadata.name ?? '',
      generation: obj.metadata.generation ?? 0,
      at: Date.now(),
    });
  }

  of(name: string, cause?: Cause): Call[] {
    return this.log.filter((c) => c.name === name && (cause === undefined || c.cause === cause));
  }

  causes(name: string): Cause[] {
    return this.of(name).map((c) => c.cause);
  }
}

export const CALLS = Symbol('test-calls');
