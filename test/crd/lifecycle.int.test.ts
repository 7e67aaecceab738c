import { CoreV1Api } from '@kubernetes/client-node';
import { CONDITION_HEALTHY, type ProxyStatus } from '../../crds/proxy-types.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { rejectionOf } from './api-error.js';
import { installProxyCrd } from './install-proxy-crd.js';
import { ProxyApi } from './proxy-api.js';

const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const namespace = uniqueName('crd-lifecycle');
const proxies = new ProxyApi(kc, namespace);

const managed = { mode: 'Managed', provider: 'mock' };
const external = { mode: 'External', endpoint: { host: 'proxy.example.net', port: 3128 } };

const fullStatus: ProxyStatus = {
  phase: 'Ready',
  providerID: 'mock/proxy-0a1b2c3d',
  ip: '203.0.113.7',
  exitIP: '198.51.100.9',
  conditions: [
    {
      type: CONDITION_HEALTHY,
      status: 'True',
      reason: 'ProbeSucceeded',
      message: 'GET https://www.gstatic.com/generate_204 through the proxy: 204',
      lastTransitionTime: '2026-01-02T03:04:05Z',
      observedGeneration: 1,
    },
    {
      type: 'Provisioned',
      status: 'True',
      reason: 'InstanceRunning',
      message: 'the instance is running',
      lastTransitionTime: '2026-01-02T03:00:00Z',
    },
  ],
  lastHealthCheckTime: '2026-01-02T03:04:05Z',
  latencyMillis: 42,
  observedGeneration: 1,
};

beforeAll(async () => {
  await installProxyCrd(kc);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
});
afterAll(() => core.deleteNamespace({ name: namespace }));

describe('updating a Proxy', () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown>, string]>([
    ['changing mode Managed → External', managed, { ...external, provider: null }, 'spec.mode is immutable'],
    [
      'changing mode External → Managed',
      external,
      { mode: 'Managed', provider: 'mock', endpoint: null },
      'spec.mode is immutable',
    ],
    ['changing provider', managed, { provider: 'gcp-eu' }, 'spec.provider is immutable'],
    ['removing provider', managed, { provider: null }, 'spec.provider is immutable'],
    ['adding a provider to an External proxy', external, { provider: 'mock' }, 'spec.provider is immutable'],
  ])('is rejected when %s', async (_case, spec, patch, expected) => {
    const name = uniqueName('immutable');
    await proxies.create(name, { spec });
    expect(await rejectionOf(proxies.patchSpec(name, patch))).toContain(expected);
    expect((await proxies.get(name)).spec).toMatchObject(spec);
  });

  // Issue 12 item 3: one mistake, one message. The fields that go with the other mode are not
  // further mistakes, whether the patch brings them or not.
  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    ['Managed → External with the External fields', managed, { ...external, provider: null }],
    ['Managed → External alone', managed, { mode: 'External' }],
    [
      'External → Managed with the Managed fields',
      external,
      { mode: 'Managed', provider: 'mock', endpoint: null },
    ],
    ['External → Managed alone', external, { mode: 'Managed' }],
  ])('reports only that spec.mode is immutable when changing mode %s', async (_case, spec, patch) => {
    const name = uniqueName('mode');
    await proxies.create(name, { spec });
    const message = await rejectionOf(proxies.patchSpec(name, patch));
    expect(message).toMatch(/: spec\.mode: Invalid value: "(Managed|External)": spec\.mode is immutable$/);
    expect(message).not.toMatch(/spec\.(provider|endpoint|placement|cloudInit)/);
  });

  it('still reports the mode rules on create', async () => {
    const message = await rejectionOf(
      proxies.create(uniqueName('mode'), { spec: { mode: 'External', provider: 'mock' } }, { dryRun: true }),
    );
    expect(message).toContain('spec.provider: Forbidden');
    expect(message).toContain('spec.endpoint: Required value');
  });

  it('is accepted for fields whose change means replacement, not rejection (port, placement, cloudInit)', async () => {
    const name = uniqueName('mutable');
    await proxies.create(name, { spec: managed });
    const patch = {
      port: 8080,
      placement: { zone: 'europe-west1-c' },
      cloudInit: { inline: '#cloud-config' },
    };
    const updated = await proxies.patchSpec(name, patch);
    expect(updated.spec).toMatchObject({ ...managed, ...patch });
    expect(updated.metadata.generation).toBe(2);
  });
});

describe('the status subresource', () => {
  it('ignores status sent with an update of the main resource', async () => {
    const name = uniqueName('status');
    const created = await proxies.create(name, { spec: managed });
    const updated = await proxies.replace({ ...created, status: fullStatus });
    expect(updated.status).toBeUndefined();
    expect((await proxies.get(name)).status).toBeUndefined();
  });

  it('ignores status sent when creating', async () => {
    const name = uniqueName('status');
    await proxies.create(name, { spec: managed, status: fullStatus });
    expect((await proxies.get(name)).status).toBeUndefined();
  });

  it('stores every declared status field written through /status, pruning none', async () => {
    const name = uniqueName('status');
    await proxies.create(name, { spec: managed });
    await proxies.patchStatus(name, fullStatus);
    const stored = await proxies.get(name);
    expect(stored.status).toEqual(fullStatus);
    expect(stored.metadata.generation).toBe(1);
  });

  it('ignores spec sent to /status', async () => {
    const name = uniqueName('status');
    const created = await proxies.create(name, { spec: managed });
    const updated = await proxies.replaceStatus({
      ...created,
      spec: { ...created.spec, port: 8080 },
      status: fullStatus,
    });
    expect(updated.spec.port).toBe(created.spec.port);
    expect(updated.status).toEqual(fullStatus);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['an unknown phase', { phase: 'Running' }, 'status.phase: Unsupported value: "Running"'],
    ['a negative latency', { latencyMillis: -1 }, 'status.latencyMillis: Invalid value: -1'],
    ['a malformed lastHealthCheckTime', { lastHealthCheckTime: 'yesterday' }, 'status.lastHealthCheckTime'],
    [
      'a condition without reason',
      {
        conditions: [
          { type: 'Healthy', status: 'True', message: '', lastTransitionTime: '2026-01-02T03:04:05Z' },
        ],
      },
      'status.conditions[0].reason: Required value',
    ],
    [
      'a condition status other than True, False, Unknown',
      {
        conditions: [
          {
            type: 'Healthy',
            status: 'Yes',
            reason: 'R',
            message: '',
            lastTransitionTime: '2026-01-02T03:04:05Z',
          },
        ],
      },
      'status.conditions[0].status: Unsupported value: "Yes"',
    ],
  ])('rejects %s', async (_case, status, expected) => {
    const name = uniqueName('status');
    await proxies.create(name, { spec: managed });
    expect(await rejectionOf(proxies.patchStatus(name, status))).toContain(expected);
  });
});

describe('the server-side table (kubectl get proxies)', () => {
  it('has the columns Mode, Provider, Phase, IP, Healthy, Age filled from spec and status', async () => {
    const name = uniqueName('table');
    await proxies.create(name, { spec: managed });
    await proxies.patchStatus(name, fullStatus);
    const table = await proxies.table();
    expect(table.kind).toBe('Table');
    expect(table.columnDefinitions.map((c) => c.name)).toEqual([
      'Name',
      'Mode',
      'Provider',
      'Phase',
      'IP',
      'Healthy',
      'Age',
      'Health-Reason',
      'Exit-IP',
      'Provisioned-Reason',
    ]);
    const row = table.rows.find((r) => r.cells[0] === name);
    expect(row?.cells.slice(0, 6)).toEqual([name, 'Managed', 'mock', 'Ready', '203.0.113.7', 'True']);
    expect(row?.cells[6]).toMatch(/^\d+[smhd]/);
    // The `-o wide` reasons (issue 24 item 6) and the exit IP (item 5).
    const healthy = fullStatus.conditions?.find((c) => c.type === 'Healthy')?.reason;
    const provisioned = fullStatus.conditions?.find((c) => c.type === 'Provisioned')?.reason;
    expect(row?.cells.slice(7)).toEqual([healthy, '198.51.100.9', provisioned]);
  });
});
