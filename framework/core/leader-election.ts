import type { Logger } from 'pino';
import { KubeApiError, isStatus, type KubeClient } from '../utils/kube-client.js';
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

/** Why an acquire/renew attempt failed (not "another replica leads", which is no failure). */
export type LeaderElectionErrorReason =
  'NamespaceNotFound' | 'Forbidden' | 'Unauthorized' | 'Timeout' | 'ApiError' | 'Unreachable';

export interface LeaderElectionCallbacks {
  onStartedLeading(): void;
  onStoppedLeading(): void;
  /** Every failed attempt, for a metric. */
  onError?(reason: LeaderElectionErrorReason): void;
}

/** A local monotonic clock in milliseconds: immune to wall-clock steps, and to other hosts' clocks. */
export type MonotonicClock = () => number;

const microTime = (d: Date) => d.toISOString().replace('Z', '000Z');

/** The part of the Lease a holder changes on every renewal: a change in it is a sign of life. */
function recordOf(lease: Lease): string {
  const { holderIdentity, leaseDurationSeconds, acquireTime, renewTime, leaseTransitions } = lease.spec;
  return JSON.stringify([holderIdentity, leaseDurationSeconds, acquireTime, renewTime, leaseTransitions]);
}

/** Classifies a failed attempt; undefined for a lost optimistic-concurrency race (409). */
export function leaderElectionErrorReason(err: unknown): LeaderElectionErrorReason | undefined {
  if (isStatus(err, 409)) return undefined;
  if (err instanceof KubeApiError) {
    if (err.statusCode === 404) return 'NamespaceNotFound';
    if (err.statusCode === 403) return 'Forbidden';
    if (err.statusCode === 401) return 'Unauthorized';
    return 'ApiError';
  }
  const name = (err as { name?: string } | undefined)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') return 'Timeout';
  return 'Unreachable';
}

/** What a person does about it. */
function fixFor(reason: LeaderElectionErrorReason, namespace: string): string {
  switch (reason) {
    case 'NamespaceNotFound':
      return `create the namespace "${namespace}" (kubectl create namespace ${namespace}), point --leader-election-namespace at an existing one, or run one replica with --leader-elect=false`;
    case 'Forbidden':
    case 'Unauthorized':
      return `grant the operator get, create and update on leases in "${namespace}" (the chart's Role does), or run one replica with --leader-elect=false`;
    default:
      return 'check that the API server is reachable; the operator keeps retrying';
  }
}

/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: acquire when the
 * lease is free or expired (optimistic concurrency through resourceVersion), renew every
 * retry period, step down when renewals fail past the renew deadline, release on stop.
 *
 * Expiry is judged by client-go's rule, never by the holder's timestamps: remember the record
 * last observed and the local monotonic time it last changed; the lease has expired only when
 * leaseDuration has passed on the local clock since then. A holder whose clock runs hours
 * behind or ahead therefore neither loses its lease to nor keeps it from a candidate.
 */
export class LeaderElector {
  private leading = false;
  private readonly stopper = new AbortController();
  private loop?: Promise<void>;
  /** Local monotonic time of our last successful acquire/renew; -Infinity = never. */
  private lastRenew = -Infinity;
  /**
   * We have written ourselves into the Lease and seen no other holder since. Leading may still
   * be false (stop came between the write and the loop's check), so stop() releases on this.
   */
  private mayHold = false;
  private observed?: { record: string; at: number };
  private lastErrorLog?: { reason: LeaderElectionErrorReason; at: number };
  readonly identity: string;
  private readonly duration: number;
  private readonly renewDeadline: number;
  private readonly retryPeriod: number;

  constructor(
    private readonly client: KubeClient,
    private readonly opts: LeaderElectionOptions,
    private readonly callbacks: LeaderElectionCallbacks,
    private readonly logger: Logger,
    private readonly now: MonotonicClock = () => performance.now(),
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
    return this.leading && this.now() - this.lastRenew < this.renewDeadline * 1000;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /**
   * Stops campaigning (an attempt in flight is cancelled); with release, clears holderIdentity
   * so a successor need not wait. Each release request has a deadline of `releaseSeconds`.
   */
  async stop(release: boolean, releaseSeconds = 5): Promise<void> {
    this.stopper.abort();
    await this.loop;
    if ((this.leading || this.mayHold) && release) {
      try {
        const signal = AbortSignal.timeout(releaseSeconds * 1000);
        const lease = await this.get(signal);
        if (lease?.spec.holderIdentity === this.identity) {
          lease.spec.holderIdentity = null;
          lease.spec.leaseDurationSeconds = 1;
          await this.client.request('PUT', this.path(this.opts.name), { body: lease, signal });
          this.logger.info({ identity: this.identity }, 'released the leader lease');
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

  /** One request's deadline: a retry period plus slack, and never past stop(). */
  private attemptSignal(): AbortSignal {
    return AbortSignal.any([this.stopper.signal, this.writeSignal()]);
  }

  /**
   * A write's deadline ignores stop(): a write cancelled mid-flight may still be committed by
   * the API server, leaving a Lease held by a process that has gone. Waiting for its answer
   * (bounded by the same deadline) lets stop() release what it wrote.
   */
  private writeSignal(): AbortSignal {
    return AbortSignal.timeout(this.retryPeriod * 1000 + 2000);
  }

  private async get(signal: AbortSignal): Promise<Lease | undefined> {
    try {
      return await this.client.request<Lease>('GET', this.path(this.opts.name), { signal });
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
      // Leadership counts from the moment before the request, as the holder's record does.
      const attemptedAt = this.now();
      try {
        if (await this.tryAcquireOrRenew(new Date())) this.lastRenew = attemptedAt;
        if (this.lastErrorLog) {
          this.logger.info({ namespace: this.opts.namespace }, 'leader election works again');
          this.lastErrorLog = undefined;
        }
      } catch (err) {
        if (!signal.aborted) this.failed(err);
      }
      if (this.now() - this.lastRenew > this.renewDeadline * 1000) this.setLeading(false);
      else if (!signal.aborted) this.setLeading(true);
      await sleep(this.retryPeriod * 1000, signal);
    }
  }

  /**
   * A failed attempt (not "another replica leads"): counted every time, logged at error level
   * with the fix when the reason changes and then once a minute, so a missing namespace is
   * never silent and never floods the log.
   */
  private failed(err: unknown): void {
    const reason = leaderElectionErrorReason(err);
    if (!reason) {
      this.logger.debug({ err: errorMessage(err) }, 'lost a race for the leader lease');
      return;
    }
    this.callbacks.onError?.(reason);
    const now = this.now();
    if (this.lastErrorLog?.reason === reason && now - this.lastErrorLog.at < 60_000) return;
    this.lastErrorLog = { reason, at: now };
    this.logger.error(
      {
        reason,
        namespace: this.opts.namespace,
        lease: this.opts.name,
        err: errorMessage(err),
        fix: fixFor(reason, this.opts.namespace),
      },
      'leader election failed: this replica cannot lead, so it reconciles nothing',
    );
  }

  private async tryAcquireOrRenew(wallNow: Date): Promise<boolean> {
    const lease = await this.get(this.attemptSignal());
    if (!lease) {
      this.mayHold = true;
      await this.client.request('POST', this.path(), {
        signal: this.writeSignal(),
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.opts.name, namespace: this.opts.namespace },
          spec: {
            holderIdentity: this.identity,
            leaseDurationSeconds: this.duration,
            acquireTime: microTime(wallNow),
            renewTime: microTime(wallNow),
            leaseTransitions: 0,
          },
        },
      });
      return true;
    }
    // client-go's rule: a record we have not seen before restarts the local expiry clock.
    const record = recordOf(lease);
    if (this.observed?.record !== record) this.observed = { record, at: this.now() };
    const holder = lease.spec.holderIdentity;
    const duration = (lease.spec.leaseDurationSeconds ?? this.duration) * 1000;
    const expired = this.observed.at + duration <= this.now();
    if (holder && holder !== this.identity && !expired) {
      this.lastRenew = -Infinity;
      this.mayHold = false;
      return false;
    }
    if (holder !== this.identity) {
      lease.spec.acquireTime = microTime(wallNow);
      lease.spec.leaseTransitions = (lease.spec.leaseTransitions ?? 0) + 1;
    }
    lease.spec.holderIdentity = this.identity;
    lease.spec.leaseDurationSeconds = this.duration;
    lease.spec.renewTime = microTime(wallNow);
    // PUT with the read resourceVersion: a concurrent candidate's write makes ours fail (409).
    this.mayHold = true;
    await this.client.request('PUT', this.path(this.opts.name), {
      body: lease,
      signal: this.writeSignal(),
    });
    this.observed = { record: recordOf(lease), at: this.now() };
    return true;
  }
}
