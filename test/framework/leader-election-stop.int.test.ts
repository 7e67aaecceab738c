import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { LeaderElector } from '../../framework/core/leader-election.js';
import { KubeClient } from '../../framework/utils/kube-client.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';

// A SIGTERM can land while the first acquire is on the wire: the API server commits the write,
// the process stops before it counts itself leader. stop() must still release that Lease, or a
// successor waits out a lease duration for a holder that has gone (CI saw this in the
// operator's shutdown test).
const kc = testKubeConfig();
const namespace = uniqueName('le-stop');
const quiet = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const LEASE = { leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 1 };
type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type Options = Parameters<KubeClient['request']>[2];

/** A client whose Lease writes reach the server, then hold their answer until `answer()`. */
/** A promise and the function that resolves it. */
function gate(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

class SlowAnswers extends KubeClient {
  private readonly held = gate();
  private readonly wrote = gate();
  /** Resolves once a Lease write has been committed by the API server. */
  readonly committed = this.wrote.promise;

  constructor() {
    super(kc);
  }

  answer(): void {
    this.held.resolve();
  }

  override async request<T>(method: Method, path: string, opts: Options = {}): Promise<T> {
    const result = await super.request<T>(method, path, opts);
    if (method === 'POST' || method === 'PUT') {
      this.wrote.resolve();
      await this.held.promise;
      // As a real client does when its request is aborted before the answer is read.
      opts.signal?.throwIfAborted();
    }
    return result;
  }
}

const holderOf = async (client: KubeClient, name: string): Promise<string | undefined> =>
  (
    await client.request<{ spec: { holderIdentity?: string } }>(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${name}`,
    )
  ).spec.holderIdentity;

beforeAll(async () => {
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
});

describe('stopping leader election', () => {
  it('releases a Lease whose acquiring write was committed while stop() was already under way', async () => {
    const client = new SlowAnswers();
    const elector = new LeaderElector(
      client,
      { namespace, name: 'stop-mid-acquire', identity: 'stopping', ...LEASE },
      { onStartedLeading: () => {}, onStoppedLeading: () => {} },
      quiet,
    );
    elector.start();
    await client.committed;
    expect(await holderOf(client, 'stop-mid-acquire')).toBe('stopping');
    const stopped = elector.stop(true);
    client.answer();
    await stopped;
    expect(elector.isLeader()).toBe(false);
    expect(await holderOf(client, 'stop-mid-acquire')).toBeUndefined();
  });
});
