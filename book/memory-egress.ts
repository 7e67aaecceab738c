// What the memory store knows of its proxies' egresses (egress.ts): a renewed egress (a
// replacement's new address) forgets the proxy's cooldowns and streaks.

import type { Logger } from 'pino';
import type { ProxyCatalog, ProxyRecord } from './catalog.js';
import { egressOf, egressStep } from './egress.js';
import type { TargetBook } from './target-book.js';

export class MemoryEgress {
  /**
   * Each proxy's egress as the book last saw it, kept after the proxy leaves the catalog
   * while the book holds cooldowns of its: a proxy created again under the name keeps them
   * only on the same address.
   */
  private readonly seen = new Map<string, string>();

  constructor(
    private readonly catalog: ProxyCatalog,
    private readonly targets: TargetBook,
    private readonly logger: Logger,
  ) {}

  /** The proxy as the catalog has it now, at now: a renewed egress forgets its cooldowns. */
  follow(record: ProxyRecord, now: () => number): void {
    const seen = egressOf(record);
    const step = egressStep(this.seen.get(record.id), seen);
    if (step === 'same') return;
    this.seen.set(record.id, seen!);
    if (step !== 'renewed') return;
    const forgotten = this.targets.forgetProxy(record.id, now());
    if (forgotten > 0)
      this.logger.info(
        { proxyID: record.id, egress: seen, cooldowns: forgotten },
        'new egress: forgot the cooldowns the old address earned',
      );
  }

  /** Forgets the egresses of proxies gone from the catalog with no cooldowns left. */
  sweep(): void {
    for (const id of this.seen.keys())
      if (this.catalog.get(id) === undefined && !this.targets.hasProxy(id)) this.seen.delete(id);
  }
}
