import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { startLocalTarget, type LocalTarget } from '../../cmd/demo/local-target.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { runOperatorIn, until, untilReady, type OperatorProcess } from '../harness/operator-process.js';
import { FINALIZER, SPEC_HASH_ANNOTATION } from '../../crds/proxy-types.js';
import { LABEL_REVISION, LABEL_UID } from '../../providers/contract.js';

// The chaos tests' world (chaos.int.test.ts, chaos-rotation.int.test.ts): Proxies in one
// namespace on the `kubernetes` provider's Pods in another, the real operator process killed
// and started again over them, and what must hold at the end.

export interface ChaosWorld {
  kc: KubeConfig;
  /** The world's Proxies (in `namespace`). */
  api: ProxyApi;
  core: CoreV1Api;
  namespace: string;
  podNamespace: string;
}

/** A world on the shared control plane: `<prefix>-…` for the Proxies, `<prefix>-pods-…` for their Pods. */
export function chaosWorld(prefix: string): ChaosWorld {
  const kc = testKubeConfig();
  const namespace = uniqueName(prefix);
  return {
    kc,
    api: new ProxyApi(kc, namespace),
    core: kc.makeApiClient(CoreV1Api),
    namespace,
    podNamespace: uniqueName(`${prefix}-pods`),
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A random number in [lo, hi): the chaos tests' random moments. */
export const random = (lo: number, hi: number) => lo + Math.random() * (hi - lo);

/** What a chaos test stands on: a probe target, the forward proxy every Pod answers with, the providers file. */
export interface ChaosStage {
  target: LocalTarget;
  squid: ForwardProxy;
  providersFile: string;
  close(): Promise<void>;
}

/** The CRD, the world's two namespaces and the stage. */
async function setUpStage(world: ChaosWorld): Promise<ChaosStage> {
  await installProxyCrd(world.kc);
  await world.core.createNamespace({ body: { metadata: { name: world.namespace } } });
  await world.core.createNamespace({ body: { metadata: { name: world.podNamespace } } });
  const target = await startLocalTarget();
  const squid = await startForwardProxy({ host: '127.0.0.1', port: await freePort() });
  const dir = await mkdtemp(join(tmpdir(), 'chaos-'));
  const providersFile = join(dir, 'providers.yaml');
  await writeFile(
    providersFile,
    `providers:\n  - name: kubernetes\n    type: kubernetes\n    kubernetes: { namespace: ${world.podNamespace}, image: ubuntu/squid }\n`,
  );
  return {
    target,
    squid,
    providersFile,
    close: async () => {
      await squid.close();
      await target.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A Managed proxy on the stage: the `kubernetes` provider, the Pods' forward proxy port, fast probes of the target. */
export function chaosSpec(stage: ChaosStage, extra: Record<string, unknown> = {}) {
  return {
    mode: 'Managed',
    provider: 'kubernetes',
    port: stage.squid.port,
    placement: { zone: 'zone-a' },
    healthCheck: {
      probeURL: stage.target.probeURL,
      intervalSeconds: 2,
      timeoutSeconds: 1,
      failureThreshold: 1,
    },
    ...extra,
  };
}

/**
 * A chaos suite: its world, and the stage its `beforeAll` sets up and its `afterAll` tears down
 * (after killing the last operator process started).
 */
export function chaosSuite(prefix: string, operatorFlags: string[] = []): ChaosSuite {
  const suite = new ChaosSuite(chaosWorld(prefix), operatorFlags);
  beforeAll(() => suite.setUp());
  afterAll(() => suite.tearDown());
  return suite;
}

export class ChaosSuite {
  private currentStage?: ChaosStage;
  private operator?: OperatorProcess;
  /** The /metrics port of the operator process started last. */
  metricsPort = 0;

  constructor(
    readonly world: ChaosWorld,
    private readonly operatorFlags: string[],
  ) {}

  get stage(): ChaosStage {
    if (!this.currentStage) throw new Error('the chaos stage is set up in beforeAll: read it in a test');
    return this.currentStage;
  }

  async setUp(): Promise<void> {
    this.currentStage = await setUpStage(this.world);
  }

  async tearDown(): Promise<void> {
    if (this.operator) await kill(this.operator);
    await this.currentStage?.close();
  }

  /**
   * A new operator process on the world's namespace (leading alone, sweeping every 5 s, with the
   * suite's flags), once its /readyz answers 200.
   */
  async startOperator(): Promise<OperatorProcess> {
    const started = await runOperatorIn(this.world.namespace, {
      leaderElection: false,
      flags: [
        '--providers-config',
        this.stage.providersFile,
        '--orphan-sweep-interval',
        '5',
        '--orphan-min-age',
        '10',
        ...this.operatorFlags,
        '--log-level',
        'warn',
      ],
    });
    this.operator = started.process;
    this.metricsPort = started.metricsPort;
    // A timeout names what the process said (a port taken, a crash) instead of only waiting.
    await untilReady(started);
    return this.operator;
  }

  /**
   * Waits up to two minutes for every invariant to hold (violations()): [] once they do, else
   * what was still wrong at the end.
   */
  async settle(survivors: Set<string>): Promise<string[]> {
    let last = ['the invariants were never read'];
    await until(
      'every invariant',
      async () => {
        last = await violations(this.world, survivors);
        return last.length === 0 ? true : undefined;
      },
      120_000,
    ).catch(() => undefined);
    return last;
  }
}

/** SIGKILL, and wait for the exit. */
export async function kill(p: OperatorProcess): Promise<void> {
  p.child.kill('SIGKILL');
  await p.exited;
}

/**
 * No kubelet runs in the test control plane: this plays it. Every Pod that is not yet Ready
 * becomes Running and Ready at 127.0.0.1, where one real forward proxy listens on the port
 * every Proxy asks for.
 */
export function fakeKubelet({ core, podNamespace }: ChaosWorld): { stop(): Promise<void> } {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const pods = await core
        .listNamespacedPod({ namespace: podNamespace })
        .catch(() => ({ items: [] as V1Pod[] }));
      for (const pod of pods.items) {
        const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
        if (ready || pod.metadata?.deletionTimestamp) continue;
        pod.status = {
          phase: 'Running',
          podIP: '127.0.0.1',
          podIPs: [{ ip: '127.0.0.1' }],
          conditions: [{ type: 'Ready', status: 'True' }],
        };
        await core
          .replaceNamespacedPodStatus({ namespace: podNamespace, name: pod.metadata!.name!, body: pod })
          .catch(() => undefined);
      }
      await sleep(300);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

/** What is wrong with the world, or [] when every invariant holds. */
export async function violations(world: ChaosWorld, survivors: Set<string>): Promise<string[]> {
  const proxies = await world.api.list();
  const { core, podNamespace } = world;
  const pods = (await core.listNamespacedPod({ namespace: podNamespace })).items;
  const problems: string[] = [];
  const byUID = new Map<string, V1Pod[]>();
  for (const pod of pods) {
    const uid = pod.metadata?.labels?.[LABEL_UID] ?? '';
    byUID.set(uid, [...(byUID.get(uid) ?? []), pod]);
  }
  const live = new Set(proxies.map((p) => p.metadata.uid));
  for (const p of proxies) {
    const name = p.metadata.name;
    if (!survivors.has(name)) {
      problems.push(`${name} was deleted but remains (finalizers ${JSON.stringify(p.metadata.finalizers)})`);
      continue;
    }
    const own = byUID.get(p.metadata.uid!) ?? [];
    if (own.length !== 1) problems.push(`${name} has ${own.length} instances`);
    const podID = own[0] ? `${podNamespace}/${own[0].metadata!.name}` : '';
    if (p.status?.providerID !== podID)
      problems.push(`${name} records ${p.status?.providerID}, its Pod is ${podID}`);
    if (
      own[0] &&
      own[0].metadata?.labels?.[LABEL_REVISION] !== p.metadata.annotations?.[SPEC_HASH_ANNOTATION]
    )
      problems.push(`${name}'s instance is not its current revision`);
    if (p.status?.phase !== 'Ready') problems.push(`${name} is ${p.status?.phase}`);
    if (!p.metadata.finalizers?.includes(FINALIZER)) problems.push(`${name} lacks its finalizer`);
  }
  for (const name of survivors)
    if (!proxies.some((p) => p.metadata.name === name)) problems.push(`${name} is missing`);
  for (const pod of pods) {
    if (!live.has(pod.metadata?.labels?.[LABEL_UID])) problems.push(`Pod ${pod.metadata?.name} has no Proxy`);
  }
  return problems;
}
