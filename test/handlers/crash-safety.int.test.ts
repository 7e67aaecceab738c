import type { CreateRequest, Instance, Provider } from '../../providers/contract.js';
import type { MockProvider } from '../../providers/mock/mock-provider.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import {
  deleteProxy,
  eventsOnceThere,
  eventually,
  managedSpec,
  mockProvider,
  startOperator,
  suiteSetup,
  type RunningOperator,
} from './operator-fixture.js';
import { DelegatingProvider } from './delegating-provider.js';

type Op = 'create' | 'delete';

/**
 * Passes calls through to the mock, but "crashes" the operator (kill: no cleanup, and every
 * later write of the running handler fails) right after the armed operation succeeded at
 * the provider — the worst moment: the world changed, Kubernetes has not heard of it.
 */
class CrashAfter extends DelegatingProvider {
  private armed: Op | undefined;
  crashed: Promise<void>;
  private signalCrash!: () => void;

  constructor(
    inner: Provider,
    private readonly crash: () => Promise<void>,
  ) {
    super(inner);
    this.crashed = new Promise((r) => (this.signalCrash = r));
  }

  arm(op: Op): void {
    this.armed = op;
  }

  private async after<T>(op: Op, result: T): Promise<T> {
    if (this.armed === op) {
      this.armed = undefined;
      await this.crash();
      this.signalCrash();
    }
    return result;
  }

  override async create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    return this.after('create', await this.inner.create(req, signal));
  }
  override async delete(id: string, signal?: AbortSignal): Promise<void> {
    return this.after('delete', await this.inner.delete(id, signal));
  }
}

const kc = testKubeConfig();
const namespace = uniqueName('crash');
let api: ProxyApi;
let target: LocalTarget;
let mock: MockProvider;
let running: RunningOperator | undefined;

beforeAll(async () => {
  ({ api, target } = await suiteSetup(kc, namespace));
  mock = mockProvider();
});

afterAll(async () => {
  await running?.stop();
  await mock?.close();
  await target?.close();
});

/** Starts an operator whose provider crashes it after `op`; resolves once it has crashed. */
async function crashingOperator(op: Op): Promise<CrashAfter> {
  // The provider needs the operator it will kill, which needs the provider: a late-bound holder.
  const crashing: { operator?: RunningOperator } = {};
  const provider = new CrashAfter(mock, async () => {
    await crashing.operator?.kill();
  });
  provider.arm(op);
  crashing.operator = running = await startOperator(kc, { mock: provider }, namespace);
  return provider;
}

async function restart(): Promise<void> {
  running = await startOperator(kc, { mock }, namespace);
}

async function instancesOf(uid: string): Promise<Instance[]> {
  return (await mock.listByTag(DEFAULT_HANDLER_SETTINGS.ownerID)).filter((i) => i.uid === uid);
}

const readyWith = (name: string, predicate: (providerID: string) => boolean = () => true) =>
  eventually(`${name} Ready`, async () => {
    const p = await api.get(name);
    return p.status?.phase === 'Ready' && predicate(p.status.providerID ?? '') ? p : undefined;
  });

describe('a crash at the worst moment leaves exactly the instances it should', () => {
  it('after the provider create, before any status write: one instance after restart', async () => {
    const provider = await crashingOperator('create');
    const created = await api.create('crash-create', { spec: managedSpec(target) });
    await provider.crashed;
    const uid = created.metadata.uid!;
    expect((await api.get('crash-create')).status?.providerID).toBeUndefined();
    expect(await instancesOf(uid)).toHaveLength(1);

    await restart();
    const p = await readyWith('crash-create');
    const instances = await instancesOf(uid);
    expect(instances.map((i) => i.id)).toEqual([p.status?.providerID]);
    await running!.stop();
  });

  it('during replacement, after the old instance was deleted: one new instance after restart', async () => {
    await restart();
    const before = await readyWith('crash-create');
    await running!.stop();

    const provider = await crashingOperator('delete');
    await api.patchSpec('crash-create', { port: 3130 });
    await provider.crashed;
    expect((await api.get('crash-create')).status?.providerID).toBe(before.status?.providerID);

    await restart();
    const after = await readyWith('crash-create', (id) => id !== before.status?.providerID);
    expect((await instancesOf(before.metadata.uid!)).map((i) => i.id)).toEqual([after.status?.providerID]);
    await running!.stop();
  });

  it('during deletion, after the provider delete: the Proxy goes and no instance remains', async () => {
    const before = await api.get('crash-create');
    const provider = await crashingOperator('delete');
    await deleteProxy(kc, namespace, 'crash-create');
    await provider.crashed;
    await expect(api.get('crash-create')).resolves.toBeDefined(); // still held by the finalizer

    await restart();
    await eventually('the Proxy gone', async () => {
      try {
        await api.get('crash-create');
        return undefined;
      } catch {
        return true;
      }
    });
    expect(await instancesOf(before.metadata.uid!)).toEqual([]);
  });

  it('after the provider create, then a spec change before it runs again: the first instance is deleted, one remains', async () => {
    await running?.stop();
    const provider = await crashingOperator('create');
    const created = await api.create('crash-then-change', { spec: managedSpec(target) });
    await provider.crashed;
    const uid = created.metadata.uid!;
    const [first] = await instancesOf(uid);
    expect(first).toBeDefined();
    await api.patchSpec('crash-then-change', { port: 3132 });

    await restart();
    const p = await readyWith('crash-then-change');
    expect((await instancesOf(uid)).map((i) => i.id)).toEqual([p.status?.providerID]);
    expect(p.status?.providerID).not.toBe(first.id);
    const events = await eventsOnceThere(kc, namespace, 'crash-then-change', 'StaleInstances');
    expect(events.find((e) => e.reason === 'StaleInstances')?.message).toContain(first.id);
    await running!.stop();
  });
});
