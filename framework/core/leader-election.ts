import type { Logger } from 'pino';
import { isStatus, type KubeClient } from '../utils/kube-client.js';
import { errorMessage } from '../utils/logger.js';
import { sleep } from '../utils/sleep.js';

export interface LeaderElectionOptions {
  namespace: string;
  name: string;
  identity?: string;
  leaseDurationSeconds?: number;
  renewDeadlineSeconds?: number;
  retryPeriodSeconds?: number;
}

interface Lease {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number;
    acquireTime?: string | null;
    renewTime?: string | null;
    leaseTransitions?: number;
  };
}

const microTime = (d: Date) => d.toISOString().replace('Z', '000Z');

/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: acquire when the
 * lease is free or expired (optimistic concurrency through resourceVersion), renew every
 * retry period, step down when renewals fail past the renew deadline, release on stop.
 */
export class LeaderElector {
  private leading = false;
  private readonly stopper = new AbortController();
  private loop?: Promise<void>;
  private lastRenew = 0;
  readonly identity: string;
  private readonly duration: number;
  private readonly renewDeadline: number;
  private readonly retryPeriod: number;

  constructor(
    private readonly client: KubeClient,
    private readonly opts: LeaderElectionOptions,
    private readonly callbacks: { onStartedLeading(): void; onStoppedLeading(): void },
    private readonly logger: Logger,
  ) {
    this.identity =
      opts.identity ??
      `${process.env.HOSTNAME ?? 'operator'}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    this.duration = opts.leaseDurationSeconds ?? 15;
    this.renewDeadline = opts.renewDeadlineSeconds ?? 10;
    this.retryPeriod = opts.retryPeriodSeconds ?? 2;
    if (!(
      this.duration > this.renewDeadline &&
      this.renewDeadline > this.retryPeriod &&
      this.retryPeriod > 0
    )) {
      throw new Error(
        `leader election: need leaseDurationSeconds > renewDeadlineSeconds > retryPeriodSeconds > 0, got ${this.duration}/${this.renewDeadline}/${this.retryPeriod}`,
      );
    }
  }

  /**
   * Leading, and the last renewal is younger than the renew deadline. Time-bounded so that a
   * stalled event loop or a slow API cannot leave us acting as leader after others may take over.
   */
  isLeader(): boolean {
    return this.leading && Date.now() - this.lastRenew < this.renewDeadline * 1000;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops campaigning; with release, clears holderIdentity so a successor need not wait. */
  async stop(release: boolean): Promise<void> {
    this.stopper.abort();
    await this.loop;
    if (this.leading && release) {
      try {
        const lease = await this.get();
        if (lease?.spec.holderIdentity === this.identity) {
          lease.spec.holderIdentity = null;
          lease.spec.leaseDurationSeconds = 1;
          await this.client.request('PUT', this.path(this.opts.name), { body: lease });
        }
      } catch (err) {
        this.logger.warn({ err: errorMessage(err) }, 'could not release the leader lease');
      }
    }
    this.setLeading(false);
  }

  private path(name?: string): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.opts.namespace}/leases${name ? `/${name}` : ''}`;
  }

  private async get(): Promise<Lease | undefined> {
    try {
      return await this.client.request<Lease>('GET', this.path(this.opts.name), {
        signal: AbortSignal.timeout(this.retryPeriod * 1000 + 2000),
      });
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    this.logger.info({ identity: this.identity, leading }, leading ? 'became leader' : 'stopped leading');
    if (leading) this.callbacks.onStartedLeading();
    else this.callbacks.onStoppedLeading();
  }

  private async run(): Promise<void> {
    const signal = this.stopper.signal;
    while (!signal.aborted) {
      // The lease says renewTime = the moment before the request; others count from that, so must we.
      const attemptedAt = Date.now();
      try {
        if (await this.tryAcquireOrRenew(new Date(attemptedAt))) this.lastRenew = attemptedAt;
      } catch (err) {
        this.logger.debug({ err: errorMessage(err) }, 'lease acquire/renew failed');
      }
      if (Date.now() - this.lastRenew > this.renewDeadline * 1000) this.setLeading(false);
      else if (this.lastRenew > 0 && !signal.aborted) this.setLeading(true);
      await sleep(this.retryPeriod * 1000, signal);
    }
  }

  private async tryAcquireOrRenew(now: Date): Promise<boolean> {
    const lease = await this.get();
    if (!lease) {
      await this.client.request('POST', this.path(), {
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.opts.name, namespace: this.opts.namespace },
          spec: {
            holderIdentity: this.identity,
            leaseDurationSeconds: this.duration,
            acquireTime: microTime(now),
            renewTime: microTime(now),
            leaseTransitions: 0,
          },
        },
      });
      return true;
    }
    const holder = lease.spec.holderIdentity;
    const renewed = lease.spec.renewTime ? Date.parse(lease.spec.renewTime) : 0;
    const expired = renewed + (lease.spec.leaseDurationSeconds ?? this.duration) * 1000 < now.getTime();
    if (holder && holder !== this.identity && !expired) {
      this.lastRenew = 0;
      return false;
    }
    if (holder !== this.identity) {
      lease.spec.acquireTime = microTime(now);
      lease.spec.leaseTransitions = (lease.spec.leaseTransitions ?? 0) + 1;
    }
    lease.spec.holderIdentity = this.identity;
    lease.spec.leaseDurationSeconds = this.duration;
    lease.spec.renewTime = microTime(now);
    // PUT with the read resourceVersion: a concurrent candidate's write makes ours fail (409).
    await this.client.request('PUT', this.path(this.opts.name), {
      body: lease,
      signal: AbortSignal.timeout(this.retryPeriod * 1000 + 2000),
    });
    return true;
  }
}
