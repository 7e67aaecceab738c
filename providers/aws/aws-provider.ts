// Written as an out-of-tree plugin would be: it imports nothing of the operator but its
// plugin API ('../plugin.js' here, 'proxy-operator/plugin' outside the tree).
import 'reflect-metadata';
import type { EC2Client, Instance as Ec2Instance, Filter } from '@aws-sdk/client-ec2';
import type { Logger } from 'pino';
import {
  AbortableProvider,
  inject,
  instanceName,
  NotFoundError,
  PROVIDER_LOGGER,
  PROVIDER_NAME,
  PROVIDER_SETTINGS,
  provider,
  ProviderPermanentError,
  providerError,
  TransientError,
  type CreateRequest,
  type Instance,
  type ProviderErrorContext,
  type ProviderOperation,
} from '../plugin.js';
import { parseAwsConfig, type AwsSettings } from './config.js';
import { awsErrorCode, classifyAwsError } from './error-mapping.js';
import { toInstance } from './instance-view.js';
import {
  buildRunInstances,
  clientToken,
  formatProviderID,
  GONE_STATES,
  missingField,
  ownedFilters,
  parseProviderID,
  sameNameFilters,
} from './requests.js';

type Sdk = typeof import('@aws-sdk/client-ec2');

/** Launch attempts when EC2 answers a token with an instance already terminated (a stale token). */
const RUN_ATTEMPTS = 2;

/**
 * EC2 instances as proxies. Create looks the instance up by its deterministic Name tag first
 * (EC2's client token alone is honoured for a limited time, and not by every emulator), then
 * launches with a client token derived from the name. Credentials come from the standard AWS
 * chain. Every call is bounded by requestTimeoutSeconds and cancelled by the caller's signal.
 */
@provider({ type: 'aws', config: parseAwsConfig })
export class AwsProvider extends AbortableProvider {
  private sdk?: Promise<Sdk>;
  private readonly clients = new Map<string, EC2Client>();

  constructor(
    @inject(PROVIDER_NAME) private readonly name: string,
    @inject(PROVIDER_SETTINGS) private readonly settings: AwsSettings,
    @inject(PROVIDER_LOGGER) private readonly logger: Logger,
  ) {
    super();
  }

  async close(): Promise<void> {
    for (const client of this.clients.values()) client.destroy();
    this.clients.clear();
  }

  protected async doCreate(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    const missing = missingField(req, this.settings);
    if (missing) throw new ProviderPermanentError(missing, this.ctx('create'));
    const { region } = this.settings;
    const sameName = await this.describe('create', { Filters: sameNameFilters(req) }, signal);
    const live = sameName
      .filter((i) => !GONE_STATES.has(i.State?.Name ?? ''))
      .sort((a, b) => (a.LaunchTime?.getTime() ?? 0) - (b.LaunchTime?.getTime() ?? 0));
    if (live.length > 0) return formatProviderID(region, live[0].InstanceId!);

    const { RunInstancesCommand } = await this.sdkModule();
    let earlier = sameName.map((i) => i.InstanceId ?? '');
    for (let attempt = 1; ; attempt++) {
      const token = clientToken(instanceName(req.uid, req.revision), earlier);
      const input = buildRunInstances(req, this.settings, token);
      const out = await this.send(
        'create',
        (client, abortSignal) => client.send(new RunInstancesCommand(input), { abortSignal }),
        signal,
      );
      const launched = out.Instances?.[0];
      if (!launched?.InstanceId)
        throw new TransientError('RunInstances returned no instance', this.ctx('create'));
      const id = formatProviderID(region, launched.InstanceId);
      if (!GONE_STATES.has(launched.State?.Name ?? '')) {
        this.logger.info({ providerID: id, proxy: req.proxy }, 'EC2 instance launched');
        return id;
      }
      // EC2 replayed an old launch for this token (it remembers tokens past termination).
      if (attempt >= RUN_ATTEMPTS) {
        throw new TransientError(
          `RunInstances keeps answering with terminated instance ${id}`,
          this.ctx('create', id),
        );
      }
      earlier = [...earlier, launched.InstanceId];
    }
  }

  protected async doGet(providerID: string, signal?: AbortSignal): Promise<Instance> {
    const { region, instanceId } = this.ref(providerID, 'get');
    const found = await this.describe('get', { InstanceIds: [instanceId] }, signal, providerID, region);
    if (found.length === 0) throw new NotFoundError('no such instance', this.ctx('get', providerID));
    // A terminated instance is gone for good; EC2 merely lists it for a while (up to an hour).
    if (found[0].State?.Name === 'terminated') {
      throw new NotFoundError('instance is terminated', this.ctx('get', providerID));
    }
    return toInstance(found[0], region, this.settings.addressType);
  }

  protected async doDelete(providerID: string, signal?: AbortSignal): Promise<void> {
    const { region, instanceId } = this.ref(providerID, 'delete');
    const { TerminateInstancesCommand } = await this.sdkModule();
    try {
      await this.send(
        'delete',
        (client, abortSignal) =>
          client.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }), { abortSignal }),
        signal,
        providerID,
        region,
      );
      this.logger.info({ providerID }, 'EC2 instance terminating');
    } catch (err) {
      // Already gone: deleting is idempotent.
      if (!(err instanceof NotFoundError)) throw err;
    }
  }

  protected async doListByTag(owner: string, signal?: AbortSignal): Promise<Instance[]> {
    const found = await this.describe('listByTag', { Filters: ownedFilters(owner) }, signal);
    return found.map((i) => toInstance(i, this.settings.region, this.settings.addressType));
  }

  /** Every instance a DescribeInstances query matches, across pages. */
  private async describe(
    op: ProviderOperation,
    query: { Filters?: Filter[]; InstanceIds?: string[] },
    signal?: AbortSignal,
    providerID?: string,
    region = this.settings.region,
  ): Promise<Ec2Instance[]> {
    const { DescribeInstancesCommand } = await this.sdkModule();
    const found: Ec2Instance[] = [];
    let NextToken: string | undefined;
    do {
      const input = { ...query, NextToken };
      const page = await this.send(
        op,
        (client, abortSignal) => client.send(new DescribeInstancesCommand(input), { abortSignal }),
        signal,
        providerID,
        region,
      );
      for (const reservation of page.Reservations ?? []) found.push(...(reservation.Instances ?? []));
      NextToken = page.NextToken;
    } while (NextToken);
    return found;
  }

  /**
   * One API call under the caller's signal and the per-call deadline. The caller's abort
   * rejects with its reason (withSignal); the deadline is a Transient failure; anything else
   * is mapped by the error table.
   */
  private async send<Out>(
    op: ProviderOperation,
    call: (client: EC2Client, abortSignal: AbortSignal) => Promise<Out>,
    signal: AbortSignal | undefined,
    providerID?: string,
    region = this.settings.region,
  ): Promise<Out> {
    const deadline = AbortSignal.timeout(this.settings.requestTimeoutSeconds * 1000);
    const abortSignal = signal ? AbortSignal.any([signal, deadline]) : deadline;
    const client = await this.client(region);
    try {
      return await call(client, abortSignal);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      const ctx = { ...this.ctx(op, providerID), cause: err };
      if (deadline.aborted) {
        throw new TransientError(`no answer from EC2 within ${this.settings.requestTimeoutSeconds} s`, ctx);
      }
      const kind = classifyAwsError(err);
      const code = awsErrorCode(err);
      const message = `${code ? `${code}: ` : ''}${err instanceof Error ? err.message : String(err)}`;
      if (kind === 'NotFound') throw new NotFoundError(message, ctx);
      throw providerError(kind, message, ctx);
    }
  }

  /** The SDK, loaded on first use: only AWS-configured operators pay for it. */
  private sdkModule(): Promise<Sdk> {
    this.sdk ??= import('@aws-sdk/client-ec2');
    return this.sdk;
  }

  /** One client per region; credentials from the standard AWS chain. */
  private async client(region: string): Promise<EC2Client> {
    let client = this.clients.get(region);
    if (!client) {
      const { EC2Client } = await this.sdkModule();
      client = this.clients.get(region) ?? new EC2Client({ region, endpoint: this.settings.endpoint });
      this.clients.set(region, client);
    }
    return client;
  }

  private ref(providerID: string, op: ProviderOperation): { region: string; instanceId: string } {
    const ref = parseProviderID(providerID);
    if (!ref) {
      throw new ProviderPermanentError(
        `malformed providerID "${providerID}", want <region>/<instance ID>`,
        this.ctx(op, providerID),
      );
    }
    return ref;
  }

  private ctx(operation: ProviderOperation, providerID?: string): ProviderErrorContext {
    return { provider: this.name, operation, providerID };
  }
}
