// What this replica tells the shared book of its proxies' egresses (egress.ts): each change
// it sees, once, in one background batch per turn of the event loop; the book decides, by
// egress.ts's rule, whether cooldowns go.

import type { Logger } from 'pino';
import type { ProxyRecord } from './catalog.js';
import { egressOf } from './egress.js';

/** Proxies per egress script call (its reply lists the renewed ones: bounded). */
const EGRESS_CHUNK = 500;

export class RedisEgressFeed {
  /** Each proxy's egress this replica sent the book last: unchanged ones go once. */
  private readonly sent = new Map<string, string>();
  /**
   * Egresses to send, in one background batch per turn of the event loop, in the order seen:
   * the book must see each step (a first exit IP read, then a new one, is two).
   */
  private pending: Array<[string, string]> = [];
  private flush: Promise<void> | undefined;
  private closed = false;

  /** send: the egress script with its arguments (count, then id and egress per proxy). */
  constructor(
    private readonly send: (args: string[]) => Promise<unknown>,
    private readonly logger: Logger,
  ) {}

  /**
   * Sends the book an egress it has not had from this replica (the first sight included: a
   * replica started after a replacement still brings the news), in the background like the
   * holds' updates.
   */
  follow(record: ProxyRecord): void {
    const seen = egressOf(record);
    if (seen === undefined || this.sent.get(record.id) === seen) return;
    this.sent.set(record.id, seen);
    this.pending.push([record.id, seen]);
    this.flush ??= this.sendPending();
  }

  /** A proxy gone from the catalog: its next sight is news again. */
  forget(proxyID: string): void {
    this.sent.delete(proxyID);
  }

  /** Stops sending (a store that is thrown away). */
  close(): void {
    this.closed = true;
  }

  /** Resolves once the egresses this replica has seen are in the book (tests wait for it). */
  async settled(): Promise<void> {
    while (this.flush !== undefined) await this.flush;
  }

  /** Sends what is pending, on the next turn (one batch for a burst of changes), until none is. */
  private async sendPending(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    while (this.pending.length > 0 && !this.closed) {
      const pending = this.pending;
      this.pending = [];
      for (let i = 0; i < pending.length; i += EGRESS_CHUNK) {
        const chunk = pending.slice(i, i + EGRESS_CHUNK);
        try {
          const reply = (await this.send([String(chunk.length), ...chunk.flat()])) as unknown[];
          const renewed = reply.slice(1).map(String);
          if (renewed.length > 0)
            this.logger.info(
              { proxyIDs: renewed, cooldowns: Number(reply[0]) },
              'new egress: forgot the cooldowns the old address earned',
            );
        } catch (err) {
          // Sent again with its next change, or by the next replica to start.
          for (const [id] of chunk) this.sent.delete(id);
          this.logger.warn({ err }, 'could not tell the shared book of new egresses');
        }
      }
    }
    this.flush = undefined;
  }
}
