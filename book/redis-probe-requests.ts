// The health engine's probe requests from the shared book: a suspicion raised on any replica
// is published on the book's channel, and every replica's listeners hear of it, through a
// subscribed connection of its own; after every (re)connect the running suspicions are read
// and told again (a PUBLISH made while the connection was down is lost).

import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ProbeRequestListener } from './lease-store.js';

export class RedisProbeRequests {
  private readonly listeners = new Set<ProbeRequestListener>();
  private subscriber: Redis | undefined;
  /** How many times the running suspicions were read for the listeners (tests wait for one). */
  private pendingTold = 0;

  /** readSuspects: the suspects script's flat reply (proxyID, address, since per suspicion). */
  constructor(
    private readonly redis: Redis,
    private readonly channel: string,
    private readonly logger: Logger,
    private readonly readSuspects: () => Promise<unknown>,
  ) {}

  onProbeRequest(listener: ProbeRequestListener): () => void {
    this.listeners.add(listener);
    // Already subscribed: this listener still hears of what was raised before it came.
    if (this.subscriber?.status === 'ready') void this.tellPending([listener]);
    this.subscribe();
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Closes the subscriber (a store that is thrown away). */
  close(): void {
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  /** Whether the probe-request subscription is live and the running suspicions were told (tests wait for it). */
  async subscribed(): Promise<void> {
    this.subscribe();
    const subscriber = this.subscriber!;
    if (subscriber.status !== 'ready')
      await new Promise<void>((resolve) => subscriber.once('ready', () => resolve()));
    await subscriber.subscribe(this.channel);
    while (this.pendingTold === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  private subscribe(): void {
    if (this.subscriber !== undefined) return;
    // A connection of its own (a subscribed connection runs nothing else), which queues the
    // SUBSCRIBE until it is connected and re-subscribes after every reconnect.
    const subscriber = this.redis.duplicate({
      enableOfflineQueue: true,
      autoResubscribe: true,
      commandTimeout: undefined,
    });
    this.subscriber = subscriber;
    subscriber.on('error', (err: Error) =>
      this.logger.debug({ err }, 'probe-request subscriber: connection error'),
    );
    subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.channel) return;
      let parsed: { proxyID?: unknown; address?: unknown; since?: unknown };
      try {
        parsed = JSON.parse(message) as typeof parsed;
      } catch {
        return;
      }
      if (typeof parsed.proxyID !== 'string' || typeof parsed.address !== 'string') return;
      if (typeof parsed.since !== 'number') return;
      this.tell([...this.listeners], parsed.proxyID, parsed.address, String(parsed.since));
    });
    // A PUBLISH made while this connection was down (a rollout, a new leader, a reconnect) is
    // lost: on every (re)connect, once subscribed, the running suspicions are read and told
    // again. Subscribed first: whatever is raised after the read arrives as a message.
    subscriber.on('ready', () => {
      subscriber
        .subscribe(this.channel)
        .then(() => this.tellPending([...this.listeners]))
        .catch((err: unknown) => {
          this.logger.warn({ err }, 'could not subscribe to probe requests; will retry on reconnect');
        });
    });
  }

  /** Tells these listeners of every suspicion running now (a duplicate is harmless). */
  private async tellPending(listeners: ProbeRequestListener[]): Promise<void> {
    try {
      const flat = ((await this.readSuspects()) as unknown[]).map(String);
      for (let i = 0; i + 2 < flat.length; i += 3) this.tell(listeners, flat[i], flat[i + 1], flat[i + 2]);
      this.pendingTold++;
    } catch (err) {
      // Asked again at the next reconnect; the suspicion's timeout bounds the hold meanwhile.
      this.logger.warn({ err }, 'could not read the running suspicions for the health engine');
    }
  }

  private tell(listeners: ProbeRequestListener[], proxyID: string, address: string, since: string): void {
    for (const listener of listeners) {
      if (!this.listeners.has(listener)) continue;
      try {
        listener(proxyID, address, since);
      } catch (err) {
        this.logger.error({ err }, 'probe-request listener failed');
      }
    }
  }
}
