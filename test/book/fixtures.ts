// Shared test fixtures for the discovery suites.
import { eventually as pollUntil } from '../../framework/testing/index.js';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import type { ProxyRecord } from '../../book/catalog.js';
import { IndexedCatalog } from '../../book/indexed-catalog.js';
import type { Clock } from '../../book/clock.js';

/** A healthy, leasable proxy; override what the case is about. */
export function proxy(id: string, overrides: Partial<ProxyRecord> = {}): ProxyRecord {
  return {
    id,
    ip: '10.0.0.1',
    port: 3128,
    attributes: {},
    phase: 'Ready',
    healthy: true,
    latencyMillis: 100,
    maxLeases: 5,
    ...overrides,
  };
}

/** A clock the test moves by hand. */
export class FakeClock implements Clock {
  constructor(private millis = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.millis;
  }
  advanceSeconds(seconds: number): void {
    this.millis += seconds * 1000;
  }
}

/**
 * The real catalog, whose content the test replaces at will: assigning `proxies` applies the
 * difference as upserts and removals, as the informer cache's events would.
 */
export class TestCatalog extends IndexedCatalog {
  constructor(proxies: ProxyRecord[] = []) {
    super();
    this.replaceAll(proxies);
  }
  get proxies(): ProxyRecord[] {
    return [...this.list()];
  }
  set proxies(records: ProxyRecord[]) {
    this.replaceAll(records);
  }
}

/** A pino logger whose JSON lines the test can read. */
export function capturingLogger(level: pino.Level = 'debug'): {
  logger: Logger;
  lines: () => Record<string, unknown>[];
} {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const logger = pino({ level }, sink);
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { logger, lines };
}

export const silentLogger: Logger = pino({ level: 'silent' });

/** Polls `condition` until it holds or the generous deadline passes (no fixed sleeps). */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  await pollUntil('a condition', condition, { timeoutMs, intervalMs: 10 });
}
