import { CreateOutageProvider } from './delegating-provider.js';
import {
  condition,
  eventually,
  everyProxy,
  isReady,
  managedSpec,
  operatorSuite,
} from './operator-fixture.js';

// A provider whose API refuses every create (an outage of its control plane; running
// instances serve on) while a spec change rolls out to 6 proxies, --max-unavailable 2. A
// rollout deletes before it creates (an instance is named by its Proxy and revision), so the
// first replacements lose their instance and cannot get a new one. The budget bounds the loss:
// those replacements stay Provisioning (ProviderError, retried with backoff) and hold their
// slots, so exactly the cap is lost and the other 4 keep serving, waiting; when the API is
// back, the rollout completes.

const CAP = 2;
const COUNT = 6;
const deletes: string[] = [];
let provider: CreateOutageProvider;

const suite = operatorSuite('create-outage', {
  providers: (mock) => ({ mock: (provider = new CreateOutageProvider(mock, deletes)) }),
  settings: {
    replaceUnhealthyAfterSeconds: 0,
    maxUnavailable: { default: { kind: 'count', value: CAP }, byProvider: {} },
    driftCheckSeconds: 1,
  },
});
const { api } = suite;
const names = Array.from({ length: COUNT }, (_, i) => `px-${i}`);

describe('a rollout while the provider refuses every create', () => {
  it(`loses at most the cap (${CAP} of ${COUNT}); the rest keep serving until creates work again`, async () => {
    const base = managedSpec(suite.target);
    await Promise.all(names.map((n) => api.create(n, { spec: base })));
    const ready = await everyProxy(api, names, 'all Ready', isReady, 90_000);
    const first = new Map(ready.map((p) => [p.metadata.name, p.status!.providerID!]));

    provider.refusingCreates = true;
    for (const n of names) await api.patchSpec(n, { placement: { ...base.placement, image: 'squid-2' } });
    await eventually('creates refused', async () => (provider.refused >= 3 ? true : undefined), 30_000);
    // Several slot polls (--instance-poll-interval, 1 s here) later, nothing more was deleted.
    await new Promise((r) => setTimeout(r, 5_000));
    const now = await Promise.all(names.map((n) => api.get(n)));
    const lost = now.filter((p) => p.status?.phase === 'Provisioning');
    const serving = now.filter((p) => p.status?.providerID === first.get(p.metadata.name));
    process.stdout.write(
      `[create-outage] cap ${CAP}: ${deletes.length} of ${COUNT} instances deleted while creates were refused (${provider.refused} refused)\n`,
    );
    expect(deletes).toHaveLength(CAP);
    expect(lost.map((p) => condition(p, 'Provisioned')?.reason)).toEqual(
      Array<string>(CAP).fill('ProviderError'),
    );
    expect(serving).toHaveLength(COUNT - CAP);
    for (const p of serving) {
      expect(p.status?.phase).toBe('Ready');
      expect(condition(p, 'Provisioned')?.reason).toBe('ReplacementPending');
    }

    provider.refusingCreates = false;
    await everyProxy(
      api,
      names,
      'all on the new revision and Ready',
      (p) => isReady(p) && p.status?.providerID !== first.get(p.metadata.name),
      120_000,
    );
    expect(deletes).toHaveLength(COUNT);
  }, 300_000);
});
