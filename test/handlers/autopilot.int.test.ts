import type { Proxy } from '../../crds/proxy-types.js';
import type { CreateRequest, Instance } from '../../providers/contract.js';
import { providerError } from '../../providers/errors.js';
import { DelegatingProvider } from './delegating-provider.js';
import {
  condition,
  deleteProxy,
  eventsOnceThere,
  eventually,
  managedSpec,
  operatorSuite,
  readyProxy,
  replacementsCounted,
} from './operator-fixture.js';

// Issue 24 on a real API server and the mock provider: a replacement that fails permanently
// keeps its slot, so a bad image stops after --max-unavailable (item 4); a Managed proxy
// Unhealthy past its grace is replaced (item 1).

/**
 * The mock, but an image named "bad" is refused for good, and chosen instances answer from a
 * dead address. An instance is its ID and creation time: the mock names instances after the
 * Proxy's UID and revision, so a replacement has the ID of the instance it replaces.
 */
class Bending extends DelegatingProvider {
  private readonly dead = new Set<string>();

  async kill(id: string): Promise<void> {
    const i = await this.inner.get(id);
    this.dead.add(`${id}@${i.createdAt.getTime()}`);
  }

  override async create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    if (req.placement.image === 'bad')
      throw providerError('Permanent', 'image "bad" does not exist', {
        provider: 'mock',
        operation: 'create',
      });
    return this.inner.create(req, signal);
  }

  override async get(id: string, signal?: AbortSignal): Promise<Instance> {
    const i = await this.inner.get(id, signal);
    // Nothing listens there: the probes are refused, as a crashed Squid's would be.
    return this.dead.has(`${id}@${i.createdAt.getTime()}`) && i.ip ? { ...i, ip: DEAD_IP } : i;
  }
}

const DEAD_IP = '127.0.0.254';
const CAP = 2;
const COUNT = 5;
let bending: Bending;
const suite = operatorSuite('autopilot', {
  providers: (mock) => ({ mock: (bending = new Bending(mock)) }),
  settings: {
    maxUnavailable: { default: { kind: 'count', value: CAP }, byProvider: {} },
    // The fleet default is off: the proxy's own field turns it on.
    replaceUnhealthyAfterSeconds: 0,
    // Both proxies of the first test die: with the fleet rule, 2 of 2 Unhealthy would hold the
    // repair (repair-hold.int.test.ts proves the hold); here the repair itself is under test.
    repairHoldUnhealthyPercent: 100,
    driftCheckSeconds: 1,
  },
});
const { api, kc, namespace } = suite;
const ready = (name: string) => readyProxy(api, name);

describe('dead Managed proxies are replaced after their Unhealthy grace (item 1)', () => {
  it('an Unhealthy proxy gets a new instance; one with the grace off is left alone', async () => {
    await api.create('dies', { spec: managedSpec(suite.target, { rotation: { unhealthyAfterSeconds: 3 } }) });
    await api.create('kept', { spec: managedSpec(suite.target, { rotation: { unhealthyAfterSeconds: 0 } }) });
    const before = await eventually('both Ready', async () => {
      const [a, b] = [await ready('dies'), await ready('kept')];
      return a && b ? { dies: a.status!.providerID!, kept: b.status!.providerID! } : undefined;
    });
    await bending.kill(before.dies);
    await bending.kill(before.kept);
    await eventually('both Unhealthy', async () =>
      (await api.get('dies')).status?.phase === 'Unhealthy' &&
      (await api.get('kept')).status?.phase === 'Unhealthy'
        ? true
        : undefined,
    );
    const replaced = await eventually(
      'the proxy with a grace replaced and Ready on a new instance',
      async () => {
        const p = await ready('dies');
        return p && p.status?.ip !== DEAD_IP ? p : undefined;
      },
      30_000,
    );
    expect(replaced.status?.replacement).toBeUndefined();
    const events = await eventsOnceThere(kc, namespace, 'dies', 'ReplacingUnhealthy');
    expect(events).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: 'Warning', reason: 'ReplacingUnhealthy' })]),
    );
    expect(await replacementsCounted(suite.op.registry, 'Unhealthy')).toBe(1);
    const kept = await api.get('kept');
    expect(kept.status).toMatchObject({ phase: 'Unhealthy', providerID: before.kept, ip: DEAD_IP });
    // An Unhealthy proxy of the provider would take a slot of the next test's rollout.
    await Promise.all(['dies', 'kept'].map((n) => deleteProxy(kc, namespace, n)));
    await eventually('both gone', async () => {
      for (const n of ['dies', 'kept']) {
        try {
          await api.get(n);
          return undefined;
        } catch {
          // gone
        }
      }
      return true;
    });
  }, 60_000);
});

describe('the budget holds under failure (item 4)', () => {
  it(`a bad image stops after ${CAP} proxies; the others wait, naming the blocked rollout; a fix resumes it`, async () => {
    const names = Array.from({ length: COUNT }, (_, i) => `fleet-${i}`);
    const spec = managedSpec(suite.target);
    await Promise.all(names.map((n) => api.create(n, { spec })));
    await eventually(`all ${COUNT} Ready`, async () => {
      for (const n of names) if (!(await ready(n))) return undefined;
      return true;
    });

    await Promise.all(names.map((n) => api.patchSpec(n, { placement: { ...spec.placement, image: 'bad' } })));
    const split = async () => {
      const all = await Promise.all(names.map((n) => api.get(n)));
      const failed = all.filter((p) => p.status?.phase === 'Failed');
      const blocked = all.filter((p) => condition(p, 'Provisioned')?.reason === 'ReplacementBlocked');
      return { all, failed, blocked };
    };
    const keys = (ps: Proxy[]) =>
      ps
        .map((p) => `${namespace}/${p.metadata.name}`)
        .sort()
        .join(', ');
    // A proxy blocked after the first failure names the second at its next slot poll.
    const { failed, blocked } = await eventually(
      `${CAP} failed replacements and ${COUNT - CAP} blocked, naming them`,
      async () => {
        const s = await split();
        const named = s.blocked.every((p) => condition(p, 'Provisioned')?.message?.includes(keys(s.failed)));
        return s.failed.length === CAP && s.blocked.length === COUNT - CAP && named ? s : undefined;
      },
      60_000,
    );
    for (const p of failed) {
      expect(condition(p, 'Provisioned')?.reason).toBe('ReplacementFailed');
      expect(p.status?.replacement?.cause).toBe('SpecChanged');
    }
    const failedKeys = keys(failed);
    for (const p of blocked) {
      // They keep serving on their old instance, and say which failures hold the rollout.
      expect(p.status?.phase).toBe('Ready');
      expect(condition(p, 'Provisioned')?.message).toContain(failedKeys);
    }
    const events = await eventsOnceThere(kc, namespace, blocked[0].metadata.name, 'ReplacementBlocked');
    expect(events).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: 'Warning', reason: 'ReplacementBlocked' })]),
    );

    // Held, not merely slow: several slot polls (--instance-poll-interval, 1 s here) later still
    // no third failure.
    await new Promise((r) => setTimeout(r, 5_000));
    const later = await split();
    expect(later.failed.length).toBe(CAP);
    expect(later.blocked.length).toBe(COUNT - CAP);

    // The fix (a spec change) retries the failed ones and releases the rest.
    await Promise.all(names.map((n) => api.patchSpec(n, { placement: spec.placement })));
    await eventually(
      'the whole fleet Ready again',
      async () => {
        for (const n of names) {
          const p = await ready(n);
          if (!p || condition(p, 'Provisioned')?.reason !== 'InstanceRunning' || p.status?.replacement)
            return undefined;
        }
        return true;
      },
      60_000,
    );
  }, 150_000);
});
