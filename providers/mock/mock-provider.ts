import 'reflect-metadata';
import type { Logger } from 'pino';
import { inject } from 'tsyringe';
import { AbortableProvider } from '../abortable-provider.js';
import {
  LABEL_OWNER,
  gcLabels,
  ownershipFromLabels,
  type CreateRequest,
  type ProxyCredentials,
  type Instance,
} from '../contract.js';
import {
  NotFoundError,
  ProviderPermanentError,
  QuotaExceededError,
  TransientError,
  type ProviderErrorContext,
  type ProviderOperation,
} from '../errors.js';
import { instanceName } from '../naming.js';
import { PROVIDER_LOGGER, PROVIDER_NAME, PROVIDER_SETTINGS, provider } from '../provider-class.js';
import { MOCK_DEFAULTS, parseMockConfig, type MockSettings } from './config.js';
import { FaultPlan, type FaultKind } from './faults.js';
import { startForwardProxy, type ForwardProxy } from './forward-proxy.js';
import { IpRange } from './ip-range.js';
import { LoopbackAddresses } from './loopback-addresses.js';

/** Milliseconds since the epoch; injectable so tests step time instead of sleeping. */
export interface Clock {
  now(): number;
}
export const systemClock: Clock = { now: () => Date.now() };

/** DI token for a test clock; the system clock when nothing is registered. */
export const MOCK_CLOCK = Symbol.for('proxy-operator.mock.clock');

interface MockInstance {
  id: string;
  /** The GC labels it was created with, as a cloud would store them. */
  labels: Record<string, string>;
  proxy: string;
  port: number;
  createdAt: Date;
  runningAt: number;
  fakeIp: string;
  /** What its proxy requires of every client (CreateRequest.credentials). Never logged. */
  credentials?: ProxyCredentials;
  /** Started once, on the first look after provisioning (serveTraffic only). */
  serving?: Promise<ForwardProxy>;
}

const FAULT_ERRORS = {
  quota: QuotaExceededError,
  transient: TransientError,
  permanent: ProviderPermanentError,
} as const;

/** Never settles: a call stuck on an unresponsive backend, until its signal aborts it. */
const forever = new Promise<never>(() => undefined);

/**
 * An in-memory provider. State is derived from the clock on every look, so it needs no
 * timers; with serveTraffic each Running instance is a real forward proxy on loopback.
 * Providers of this type in one operator share one loopback address allocator.
 */
@provider({ type: 'mock', config: parseMockConfig, shared: [LoopbackAddresses] })
export class MockProvider extends AbortableProvider {
  private readonly instances = new Map<string, MockInstance>();
  private readonly faults = new FaultPlan();
  private readonly ips: IpRange;
  private readonly clock: Clock;
  private readonly settings: MockSettings;

  /**
   * @param settings unset fields take MOCK_DEFAULTS (5 s provisioning, fake 10.99/16 IPs, no faults)
   * @param loopback where served proxies listen; shared by the mock providers of one operator
   */
  constructor(
    @inject(PROVIDER_NAME) private readonly name: string,
    @inject(PROVIDER_SETTINGS) settings: Partial<MockSettings>,
    @inject(PROVIDER_LOGGER) private readonly logger: Logger,
    @inject(LoopbackAddresses) private readonly loopback: LoopbackAddresses = new LoopbackAddresses(),
    @inject(MOCK_CLOCK, { isOptional: true }) clock?: Clock,
  ) {
    super();
    this.settings = { ...MOCK_DEFAULTS, faults: {}, ...settings };
    this.clock = clock ?? systemClock;
    this.ips = new IpRange(this.settings.ipRange);
    for (const [op, fault] of Object.entries(this.settings.faults)) {
      if (fault) this.faults.inject(op as ProviderOperation, fault.kind, fault.count);
    }
  }

  /** The next `count` creates fail with `kind`. */
  failNextCreates(count: number, kind: FaultKind): void {
    this.faults.inject('create', kind, count);
  }

  /** The next `count` calls of `operation` fail with `kind`. */
  injectFault(operation: ProviderOperation, kind: FaultKind, count = 1): void {
    this.faults.inject(operation, kind, count);
  }

  /**
   * What a create token that missed under eventual consistency leaves behind: a second
   * instance with the same labels (Proxy UID, revision, owner) as `providerID`, under a new
   * id, born now by the mock's clock. Names are deterministic here, so a create cannot do it.
   */
  duplicate(providerID: string): string {
    const original = this.instances.get(providerID);
    if (!original) throw new Error(`mock: no instance ${providerID} to duplicate`);
    const id = `${providerID}-twin-${this.instances.size}`;
    const now = this.clock.now();
    this.instances.set(id, {
      ...original,
      id,
      serving: undefined,
      createdAt: new Date(now),
      runningAt: now + this.settings.provisioningSeconds * 1000,
      fakeIp: this.ips.next(),
    });
    return id;
  }

  clearFaults(): void {
    this.faults.clear();
  }

  protected async doCreate(req: CreateRequest): Promise<string> {
    await this.maybeFail('create');
    if (!Number.isInteger(req.port) || req.port < 1 || req.port > 65535) {
      throw new ProviderPermanentError(`port must be 1-65535, got ${req.port}`, this.ctx('create'));
    }
    const id = instanceName(req.uid, req.revision);
    // No await between the lookup and the insert: concurrent creates of one UID share an instance.
    if (!this.instances.has(id)) {
      const now = this.clock.now();
      this.instances.set(id, {
        id,
        labels: gcLabels(req),
        proxy: req.proxy,
        port: req.port,
        createdAt: new Date(now),
        runningAt: now + this.settings.provisioningSeconds * 1000,
        fakeIp: this.ips.next(),
        ...(req.credentials === undefined ? {} : { credentials: { ...req.credentials } }),
      });
      this.logger.info({ providerID: id, proxy: req.proxy }, 'mock instance created');
    }
    return id;
  }

  protected async doGet(providerID: string): Promise<Instance> {
    await this.maybeFail('get', providerID);
    const inst = this.instances.get(providerID);
    if (!inst) throw new NotFoundError('no such instance', this.ctx('get', providerID));
    return this.view(inst, 'get');
  }

  protected async doDelete(providerID: string): Promise<void> {
    await this.maybeFail('delete', providerID);
    const inst = this.instances.get(providerID);
    if (!inst) return;
    this.instances.delete(providerID);
    await this.stopServing(inst);
    this.logger.info({ providerID }, 'mock instance deleted');
  }

  protected async doListByTag(owner: string): Promise<Instance[]> {
    await this.maybeFail('listByTag');
    const views = await Promise.allSettled(
      [...this.instances.values()]
        .filter((i) => i.labels[LABEL_OWNER] === owner)
        .map((i) => this.view(i, 'listByTag')),
    );
    return views.flatMap((v) => (v.status === 'fulfilled' ? [v.value] : []));
  }

  /** Stops every served proxy; the instances stay (the process is shutting down). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.instances.values()].map((i) => this.stopServing(i)));
  }

  private async view(inst: MockInstance, op: ProviderOperation): Promise<Instance> {
    const base = { id: inst.id, ...ownershipFromLabels(inst.labels), createdAt: inst.createdAt };
    if (this.clock.now() < inst.runningAt) return { ...base, ip: '', state: 'Provisioning' };
    if (!this.settings.serveTraffic) return { ...base, ip: inst.fakeIp, state: 'Running' };
    const proxy = await this.ensureServing(inst, op);
    // Deleted while its proxy was starting: it no longer exists.
    if (this.instances.get(inst.id) !== inst)
      throw new NotFoundError('no such instance', this.ctx(op, inst.id));
    return { ...base, ip: proxy.host, state: 'Running' };
  }

  private ensureServing(inst: MockInstance, op: ProviderOperation): Promise<ForwardProxy> {
    if (!inst.serving) {
      inst.serving = this.loopback.bind((host) =>
        startForwardProxy({ host, port: inst.port, credentials: inst.credentials }),
      );
      inst.serving.then(
        (p) =>
          this.logger.info({ providerID: inst.id, address: `${p.host}:${p.port}` }, 'mock proxy serving'),
        () => (inst.serving = undefined), // let the next look retry
      );
    }
    return inst.serving.catch((err: unknown) => {
      throw new TransientError(`cannot start the mock proxy: ${(err as Error).message}`, {
        ...this.ctx(op, inst.id),
        cause: err,
      });
    });
  }

  private async stopServing(inst: MockInstance): Promise<void> {
    const serving = inst.serving;
    inst.serving = undefined;
    if (!serving) return;
    try {
      await (await serving).close();
    } catch {
      // It never started: nothing to stop.
    }
  }

  /** Consumes the next injected fault for `op`: throws it, or (hang) never answers. */
  private maybeFail(op: ProviderOperation, providerID?: string): Promise<void> {
    const kind = this.faults.take(op);
    if (!kind) return Promise.resolve();
    if (kind === 'hang') return forever;
    return Promise.reject(new FAULT_ERRORS[kind](`injected ${kind} fault`, this.ctx(op, providerID)));
  }

  private ctx(operation: ProviderOperation, providerID?: string): ProviderErrorContext {
    return { provider: this.name, operation, providerID };
  }
}
