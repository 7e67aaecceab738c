import { CoreV1Api } from '@kubernetes/client-node';
import { CREDENTIALS_SECRET_LABEL, IN_USE_COPY_LABEL_VALUE } from '../../crds/proxy-credentials.js';
import { SPEC_HASH_ANNOTATION, type Proxy } from '../../crds/proxy-types.js';
import { credentialsTag, legacyCredentialsTag } from '../../handlers/credentials-digest.js';
import { createRequest } from '../../handlers/instance-actions.js';
import {
  CREDENTIALS_IN_USE_ANNOTATION,
  credentialsSecret,
  inUseSecretName,
} from '../../handlers/proxy-credentials.js';
import { DEFAULT_HANDLER_SETTINGS, IN_PROCESS_CREDENTIALS_KEY } from '../../handlers/settings.js';
import { legacySpecHash, specHash } from '../../handlers/spec-hash.js';
import type { CreateRequest, ProxyCredentials } from '../../providers/contract.js';
import type { MockProvider } from '../../providers/mock/mock-provider.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { DelegatingProvider } from './delegating-provider.js';
import {
  eventually,
  managedSpec,
  mockProvider,
  startOperator,
  suiteSetup,
  type RunningOperator,
} from './operator-fixture.js';

// An upgrade from the version whose credentials digests were unkeyed SHA-256
// (credentials-digest.ts): the Proxies it left carry a spec hash and a credentials-in-use tag
// in the old form, and instances named by the old spec hash. The upgraded operator must take
// them as unchanged (no instance replaced: a fleet-wide replacement on upgrade is itself an
// outage) and rewrite both annotations keyed; a proxy whose credentials were rotated before
// the upgrade is still replaced, once.

/** Records every create and delete the operator asks of the provider. */
class Recording extends DelegatingProvider {
  readonly creates: string[] = [];
  readonly deletes: string[] = [];
  override async create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    const id = await super.create(req, signal);
    this.creates.push(id);
    return id;
  }
  override delete(id: string, signal?: AbortSignal): Promise<void> {
    this.deletes.push(id);
    return super.delete(id, signal);
  }
}

const kc = testKubeConfig();
const namespace = uniqueName('digest-upgrade');
const core = kc.makeApiClient(CoreV1Api);
const KEY = IN_PROCESS_CREDENTIALS_KEY;
const CLOUD_INIT = '#cloud-config\npackages: [squid]\n';
const UNCHANGED = ['old-a', 'old-b', 'old-c'];
// The orphan sweep runs every second on instances of any age: an instance whose name carries the
// old revision while its Proxy records the keyed one must still be its Proxy's, not a stray.
const SWEEP_OFTEN = { orphanSweepIntervalSeconds: 1, orphanMinAgeSeconds: 0 };
const ROTATED = 'old-rotated';
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

const b64 = (s: string) => Buffer.from(s).toString('base64');
const owned = (p: Proxy) => [
  { apiVersion: p.apiVersion, kind: 'Proxy', name: p.metadata.name, uid: p.metadata.uid!, controller: true },
];

/**
 * A Proxy as the earlier version left it: its Secret holding `current`, an instance created
 * with `created` and named by the unkeyed spec hash, the unkeyed records and the copy they name.
 */
async function leftByEarlierVersion(
  name: string,
  created: ProxyCredentials,
  current: ProxyCredentials,
): Promise<{ providerID: string; oldHash: string }> {
  const p = await api.create(name, { spec: managedSpec(target, { cloudInit: { inline: CLOUD_INIT } }) });
  const secret = credentialsSecret(p, current);
  await core.createNamespacedSecret({
    namespace,
    body: { ...secret, metadata: { ...secret.metadata, ownerReferences: owned(p) } },
  });
  const oldTag = legacyCredentialsTag(created);
  await core.createNamespacedSecret({
    namespace,
    body: {
      ...credentialsSecret(p, created),
      immutable: true,
      metadata: {
        name: inUseSecretName(name, oldTag),
        labels: { [CREDENTIALS_SECRET_LABEL]: IN_USE_COPY_LABEL_VALUE },
        ownerReferences: owned(p),
      },
      data: { username: b64(created.username), password: b64(created.password) },
    },
  });
  const oldHash = legacySpecHash(p.spec, CLOUD_INIT, created);
  const providerID = await mock.create(
    createRequest(p, DEFAULT_HANDLER_SETTINGS.ownerID, {
      cloudInit: CLOUD_INIT,
      credentials: created,
      revision: oldHash,
    }),
  );
  const stored = await api.get(name);
  await api.replace({
    ...stored,
    metadata: {
      ...stored.metadata,
      annotations: { [SPEC_HASH_ANNOTATION]: oldHash, [CREDENTIALS_IN_USE_ANNOTATION]: oldTag },
    },
  });
  await api.patchStatus(name, { providerID, phase: 'Ready' });
  return { providerID, oldHash };
}

const creds = (name: string, version = 'v1'): ProxyCredentials => ({
  username: `user-${name}`,
  password: `weak-${version}`,
});

it('an upgraded operator replaces none of the unchanged old-form proxies and rewrites their records keyed', async () => {
  const before = new Map<string, { providerID: string; oldHash: string }>();
  for (const name of UNCHANGED) before.set(name, await leftByEarlierVersion(name, creds(name), creds(name)));
  const rotated = await leftByEarlierVersion(ROTATED, creds(ROTATED), creds(ROTATED, 'v2'));
  const provider = new Recording(mock);
  running = await startOperator(kc, { mock: provider }, namespace, SWEEP_OFTEN);

  for (const name of UNCHANGED) {
    const p = await eventually(`${name} rewritten keyed and Ready`, async () => {
      const got = await api.get(name);
      const a = got.metadata.annotations ?? {};
      const keyed = specHash(got.spec, CLOUD_INIT, creds(name), KEY);
      return a[SPEC_HASH_ANNOTATION] === keyed && got.status?.phase === 'Ready' ? got : undefined;
    });
    expect(p.status?.providerID).toBe(before.get(name)!.providerID);
    expect(p.metadata.annotations).toMatchObject({
      [SPEC_HASH_ANNOTATION]: specHash(p.spec, CLOUD_INIT, creds(name), KEY),
      [CREDENTIALS_IN_USE_ANNOTATION]: credentialsTag(creds(name), KEY),
    });
    // The copy the keyed record names exists: the instance is probed and leased with it.
    const copy = await core.readNamespacedSecret({
      namespace,
      name: inUseSecretName(name, credentialsTag(creds(name), KEY)),
    });
    expect(Buffer.from(copy.data!.password, 'base64').toString()).toBe(creds(name).password);
  }
  // The control: credentials rotated before the upgrade still replace that proxy, once.
  const replaced = await eventually(`${ROTATED} replaced`, async () => {
    const got = await api.get(ROTATED);
    const id = got.status?.providerID;
    return got.status?.phase === 'Ready' && id && id !== rotated.providerID ? got : undefined;
  });
  expect(replaced.metadata.annotations?.[SPEC_HASH_ANNOTATION]).toBe(
    specHash(replaced.spec, CLOUD_INIT, creds(ROTATED, 'v2'), KEY),
  );

  // Several probe intervals and a restart later: still the same instances.
  await new Promise((r) => setTimeout(r, 4000));
  await running.stop();
  running = await startOperator(kc, { mock: provider }, namespace, SWEEP_OFTEN);
  await new Promise((r) => setTimeout(r, 4000));
  for (const name of UNCHANGED)
    expect((await api.get(name)).status?.providerID).toBe(before.get(name)!.providerID);
  expect(provider.deletes).toEqual([rotated.providerID]);
  expect(provider.creates).toEqual([replaced.status?.providerID]);
}, 120_000);
