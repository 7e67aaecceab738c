import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoreV1Api, Watch } from '@kubernetes/client-node';
import type { Proxy } from '../../crds/proxy-types.js';
import { DeleteRecordingProvider } from './delegating-provider.js';
import {
  condition,
  eventually,
  everyProxy,
  isReady,
  managedSpec,
  operatorSuite,
} from './operator-fixture.js';

// A rollout during a shared outage, on a real API server with the mock provider's forward
// proxies on loopback. The probe target goes down: all 8 proxies turn Unhealthy and every repair
// is held (ProbeTargetUnreachable); the proxies themselves are fine. The SRE then edits the
// cloud-init Secret they share (--max-unavailable 2). A tester found all 8 instances deleted
// within seconds: the held proxies' Unhealthy phase was read as dead, replaced without a slot,
// and their new instances could not be verified (the target down), so a bad cloud-init would
// have broken every proxy. Now 2 are replaced, the rollout stops behind them while they cannot
// be seen to work, and goes on, 2 at a time, once the target is back.

const COUNT = 8;
const CAP = 2;
const deletes: string[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let down = false;
let probes: Server;
let probeURL = '';

const suite = operatorSuite('rollout-while-held', {
  providers: (mock) => ({ mock: new DeleteRecordingProvider(mock, deletes) }),
  settings: {
    replaceUnhealthyAfterSeconds: 5,
    repairHoldUnhealthyPercent: 20,
    maxUnavailable: { default: { kind: 'count', value: CAP }, byProvider: {} },
    driftCheckSeconds: 1,
  },
});
const { api, kc, namespace } = suite;
const core = kc.makeApiClient(CoreV1Api);
const names = Array.from({ length: COUNT }, (_, i) => `px-${i}`);

function secret(version: string) {
  return {
    metadata: { name: 'shared-init', labels: { 'crawl.example.com/cloud-init': 'true' } },
    stringData: { 'user-data': `#cloud-config\n# ${version}\n` },
  };
}

beforeAll(async () => {
  probes = createServer((req, res) => {
    if (down) {
      req.socket.destroy();
      return;
    }
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => probes.listen(0, '127.0.0.1', resolve));
  probeURL = `http://127.0.0.1:${(probes.address() as AddressInfo).port}/generate_204`;
});

afterAll(async () => {
  probes?.closeAllConnections();
  await new Promise((resolve) => probes?.close(resolve));
});

const all = () => Promise.all(names.map((n) => api.get(n)));
/** proxy_operator_repairs_held by reason, as /metrics has it. */
async function heldGauge(): Promise<Record<string, number>> {
  const values =
    (await suite.op.registry.getSingleMetric('proxy_operator_repairs_held')?.get())?.values ?? [];
  return Object.fromEntries(values.filter((v) => v.value > 0).map((v) => [String(v.labels.reason), v.value]));
}
const everyOne = (what: string, test: (p: Proxy) => boolean, timeoutMs?: number) =>
  everyProxy(api, names, what, test, timeoutMs);
/** Between instances, or on a new one not yet seen Ready (status.replacement is cleared on Ready). */
const replacing = (p: Proxy) => p.status?.phase === 'Provisioning' || p.status?.replacement !== undefined;

describe('a rollout while repairs are held is paced by --max-unavailable', () => {
  it(`${COUNT} held proxies, cap ${CAP}: ${CAP} replaced, the rest wait behind them until the target is back`, async () => {
    await core.createNamespacedSecret({ namespace, body: secret('v1') });
    const base = managedSpec(suite.target, {
      cloudInit: { secretRef: { name: 'shared-init', key: 'user-data' } },
    });
    const spec = { ...base, healthCheck: { ...base.healthCheck, probeURL } };
    await Promise.all(names.map((n) => api.create(n, { spec })));
    const ready = await everyOne(`all ${COUNT} Ready`, isReady, 90_000);
    const first = new Map(ready.map((p) => [p.metadata.name, p.status!.providerID!]));

    down = true;
    await everyOne(`all ${COUNT} held`, (p) => condition(p, 'Provisioned')?.reason === 'RepairHeld', 60_000);
    expect(deletes).toEqual([]);
    expect(await heldGauge()).toEqual({ ProbeTargetUnreachable: COUNT });

    // Every status the API server stores: how many proxies are being replaced at once.
    const state = new Map<string, boolean>();
    let maxReplacing = 0;
    const watching = await new Watch(kc).watch(
      `/apis/crawl.example.com/v1alpha1/namespaces/${namespace}/proxies`,
      {},
      (_t, p: Proxy) => {
        state.set(p.metadata.name, replacing(p));
        maxReplacing = Math.max(maxReplacing, [...state.values()].filter(Boolean).length);
      },
      () => {},
    );
    try {
      await eventually('the watch sees every proxy', async () => (state.size === COUNT ? true : undefined));
      await core.replaceNamespacedSecret({ namespace, name: 'shared-init', body: secret('v2') });

      // Two replaced; their new instances up but Unhealthy (the target is down): not verified.
      const unverified = (p: Proxy) =>
        p.status?.phase === 'Unhealthy' &&
        p.status.replacement?.cause === 'SpecChanged' &&
        p.status.providerID !== first.get(p.metadata.name);
      await eventually(
        `${CAP} replacements up, not verified`,
        async () => ((await all()).filter(unverified).length === CAP ? true : undefined),
        60_000,
      );
      // Several slot polls (--instance-poll-interval, 1 s here) later the rollout has not gone past them.
      await sleep(5_000);
      expect(deletes).toHaveLength(CAP);
      const waiting = (await all()).filter((p) => !unverified(p));
      expect(waiting).toHaveLength(COUNT - CAP);
      // Each waiting proxy still shows held (kubectl get px, the dashboard): the hold's reason
      // first, then what its spec change waits on; the gauge counts every one.
      for (const p of waiting) {
        expect(p.status?.providerID).toBe(first.get(p.metadata.name));
        expect(p.status?.phase).toBe('Unhealthy');
        expect(condition(p, 'Provisioned')?.reason).toBe('RepairHeld');
        expect(condition(p, 'Provisioned')?.message).toMatch(
          /^repair held: the probe target .* fails when the operator checks it directly.*; spec changed while its repair is held/,
        );
      }
      // The gauge counts exactly the proxies shown held (the unverified replacements too, once
      // past their grace: their repair holds as well).
      await eventually('the gauge counts every proxy shown held', async () => {
        const shown = (await all()).filter((p) => condition(p, 'Provisioned')?.reason === 'RepairHeld');
        const gauge = await heldGauge();
        return shown.length >= COUNT - CAP && gauge.ProbeTargetUnreachable === shown.length
          ? true
          : undefined;
      });

      // The target is back: the rollout finishes, still paced.
      down = false;
      await everyOne(
        `all ${COUNT} on a new instance and Ready`,
        (p) => isReady(p) && p.status?.providerID !== first.get(p.metadata.name),
        180_000,
      );
    } finally {
      watching.abort();
    }
    process.stdout.write(
      `[rollout-while-held] cap ${CAP}: at most ${maxReplacing} of ${COUNT} being replaced at once; ${deletes.length} deletes\n`,
    );
    expect(maxReplacing).toBeLessThanOrEqual(CAP);
    expect(deletes).toHaveLength(COUNT);
  }, 300_000);
});
