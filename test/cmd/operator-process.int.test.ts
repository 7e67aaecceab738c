// The operator's entry point as a real process (cmd/operator.ts through the harness's
// TypeScript hooks): what `npm start` and the container run.
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { request } from 'undici';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { runOperator, runOperatorIn, until, untilReady } from '../harness/operator-process.js';

const kc = testKubeConfig();
const namespace = uniqueName('entrypoint');
let dir: string;

beforeAll(async () => {
  await installProxyCrd(kc);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  dir = await mkdtemp(join(tmpdir(), 'entrypoint-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the operator process', () => {
  it.each([
    [
      'a providers config with a missing key',
      'providers:\n  - name: gcp-eu\n    type: gcp\n    gcp: {}\n',
      /providers\[0\] \(gcp-eu\): gcp\.project: required string/,
    ],
    [
      'an unknown provider type',
      'providers:\n  - name: hetzner\n    type: hetzner\n',
      /providers\[0\] \(hetzner\): type: .*hetzner/,
    ],
    [
      'an External endpoint range that does not exist (issue 44 item 5)',
      'providers: []\nexternal: { allowEndpointRanges: [private] }\n',
      /external\.allowEndpointRanges\[0\]: must be one of loopback, link-local, metadata, unspecified, cluster, got "private"/,
    ],
  ])('refuses to start on %s, naming the file and the key (exit 2)', async (_what, yaml, message) => {
    const file = join(dir, `${Math.random().toString(36).slice(2)}.yaml`);
    await writeFile(file, yaml);
    const op = runOperator(['--providers-config', file]);
    expect(await op.exited).toBe(2);
    expect(op.output()).toContain(file);
    expect(op.output()).toMatch(message);
  });

  it('refuses an unknown flag with the usage (exit 2)', async () => {
    const op = runOperator(['--no-such-flag', 'x']);
    expect(await op.exited).toBe(2);
    expect(op.output()).toMatch(/Unknown option '--no-such-flag'[\s\S]*Usage: proxy-operator/);
  });

  it('serves probes and the discovery API, holds the leader Lease, and on SIGTERM releases it and exits 0', async () => {
    const serving = await runOperatorIn(namespace, { env: { POD_NAME: 'operator-under-test' } });
    const { process: op, metricsPort: metrics, discoveryPort: discovery } = serving;
    try {
      await untilReady(serving);
      const leases = kc.makeApiClient(CoordinationV1Api);
      await until('the Lease held', async () => {
        const lease = await leases.readNamespacedLease({ name: 'proxy-operator-leader', namespace });
        // POD_NAME is the prefix of a per-process identity (cmd/leader-identity.ts).
        return /^operator-under-test_[0-9a-f]{12}$/.test(lease.spec?.holderIdentity ?? '') ? true : undefined;
      });
      const list = await request(`http://127.0.0.1:${discovery}/v1/proxies`);
      expect(list.statusCode).toBe(200);
      expect(await list.body.json()).toEqual({ items: [] });
      const scraped = await (await request(`http://127.0.0.1:${metrics}/metrics`)).body.text();
      expect(scraped).toContain('proxy_operator_proxies');
      expect(scraped).toContain('operator_framework_reconciles_total');

      op.child.kill('SIGTERM');
      expect(await op.exited).toBe(0);
      const lease = await leases.readNamespacedLease({ name: 'proxy-operator-leader', namespace });
      expect(lease.spec?.holderIdentity ?? '').toBe('');
    } finally {
      op.child.kill('SIGKILL');
    }
  });
});
