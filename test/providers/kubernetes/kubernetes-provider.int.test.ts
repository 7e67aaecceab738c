import { eventually as pollUntil } from '../../../framework/testing/index.js';
import { CoreV1Api, type V1PodStatus } from '@kubernetes/client-node';
import { pino } from 'pino';
import { KubernetesProvider } from '../../../providers/kubernetes/kubernetes-provider.js';
import { isNotFound, isPermanent } from '../../../providers/errors.js';
import { instanceName } from '../../../providers/naming.js';
import { testKubeConfig, uniqueName } from '../../harness/kube.js';
import { caught } from '../caught.js';
import { SQUID_GRACE_SECONDS } from '../../../providers/kubernetes/squid-config.js';

const logger = pino({ level: 'silent' });

function eventually<T>(
  probe: () => Promise<T>,
  ok: (v: T) => boolean,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  return pollUntil(
    what,
    async () => {
      const value = await probe();
      return ok(value) ? { value } : undefined;
    },
    { timeoutMs, intervalMs: 200 },
  ).then((r) => r.value);
}

describe('the kubernetes provider against a real API server', () => {
  const namespace = uniqueName('providers-k8s');
  let core: CoreV1Api;
  let provider: KubernetesProvider;
  const request = (uid: string) => ({
    uid,
    proxy: `${namespace}/proxy-a`,
    namespace: namespace,
    owner: 'test-owner',
    port: 3128,
    placement: {},
  });

  /**
   * No kubelet runs here, so Pods never start: the test plays the kubelet and writes the
   * Pod's status through the status subresource.
   */
  async function setPodStatus(name: string, status: V1PodStatus) {
    const pod = await core.readNamespacedPod({ name, namespace });
    pod.status = status;
    await core.replaceNamespacedPodStatus({ name, namespace, body: pod });
  }

  beforeAll(async () => {
    core = testKubeConfig().makeApiClient(CoreV1Api);
    provider = new KubernetesProvider(
      'kubernetes',
      { namespace, image: 'ubuntu/squid' },
      logger,
      testKubeConfig(),
    );
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });
  afterAll(async () => {
    await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  it('runs a proxy Pod through its whole lifecycle', async () => {
    const uid = '11111111-2222-4333-8444-555555555555';
    const name = instanceName(uid);

    const id = await provider.create(request(uid));
    expect(id).toBe(`${namespace}/${name}`);
    const pod = await core.readNamespacedPod({ name, namespace });
    expect(pod.metadata?.labels).toMatchObject({
      'proxy-operator-uid': uid,
      'proxy-operator-managed': 'true',
    });
    expect(pod.spec?.containers[0]).toMatchObject({
      image: 'ubuntu/squid',
      ports: [{ containerPort: 3128 }],
    });
    expect(await provider.get(id)).toMatchObject({ id, uid, state: 'Provisioning', ip: '' });

    // A repeated create after a simulated crash (409 AlreadyExists) returns the same Pod.
    await expect(provider.create(request(uid))).resolves.toBe(id);
    expect((await provider.listByTag('test-owner')).map((i) => i.id)).toEqual([id]);

    await setPodStatus(name, {
      phase: 'Running',
      podIP: '10.244.0.7',
      podIPs: [{ ip: '10.244.0.7' }],
      conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }],
    });
    expect(await provider.get(id)).toMatchObject({ state: 'Running', ip: '10.244.0.7', uid });

    await setPodStatus(name, { phase: 'Failed', podIP: '10.244.0.7', podIPs: [{ ip: '10.244.0.7' }] });
    expect((await provider.get(id)).state).toBe('Terminated');

    await provider.delete(id);
    await eventually(
      () => caught(provider.get(id)),
      (err) => isNotFound(err),
      'the deleted Pod to be gone',
    );
    await expect(provider.delete(id)).resolves.toBeUndefined();
  });

  it('asks for an image already on the node, even an untagged one, and brings its own squid.conf', async () => {
    const uid = '21212121-2222-4333-8444-555555555555';
    const id = await provider.create(request(uid));
    const pod = await core.readNamespacedPod({ name: instanceName(uid), namespace });
    const [container] = pod.spec!.containers;
    // The API server would default an untagged image to Always: a registry pull at every start.
    expect(container.imagePullPolicy).toBe('IfNotPresent');
    expect(container.env?.find((e) => e.name === 'SQUID_CONF')?.value).toContain('http_access allow clients');
    expect(pod.spec!.terminationGracePeriodSeconds).toBe(SQUID_GRACE_SECONDS);
    await provider.delete(id);
  });

  it.each<[string, string, V1PodStatus, string]>([
    [
      'an image that cannot be pulled',
      '31313131-2222-4333-8444-555555555555',
      {
        phase: 'Pending',
        containerStatuses: [
          {
            name: 'squid',
            image: 'ubuntu/squid',
            imageID: '',
            ready: false,
            restartCount: 0,
            state: {
              waiting: {
                reason: 'ErrImagePull',
                message: 'failed to resolve reference "docker.io/ubuntu/squid:latest"',
              },
            },
          },
        ],
      },
      'ErrImagePull: failed to resolve reference "docker.io/ubuntu/squid:latest"',
    ],
    [
      'a Pod no node can take',
      '41414141-2222-4333-8444-555555555555',
      {
        phase: 'Pending',
        conditions: [
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: '0/1 nodes are available: 1 Insufficient memory.',
            lastTransitionTime: new Date(),
          },
        ],
      },
      'Unschedulable: 0/1 nodes are available: 1 Insufficient memory.',
    ],
  ])("reports %s with the kubelet's reason and message", async (_case, uid, status, detail) => {
    const id = await provider.create(request(uid));
    await setPodStatus(instanceName(uid), status);
    expect(await provider.get(id)).toMatchObject({ state: 'Provisioning', detail });
    await provider.delete(id);
  });

  it('deletes a Pod once: repeated deletes while it terminates send nothing and log nothing', async () => {
    const lines: string[] = [];
    const logged = new KubernetesProvider(
      'kubernetes',
      { namespace, image: 'ubuntu/squid' },
      pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }),
      testKubeConfig(),
    );
    const uid = '51515151-2222-4333-8444-555555555555';
    const name = instanceName(uid);
    const id = await logged.create(request(uid));
    // Bound to a node, a Pod waits for its kubelet to confirm termination (an unbound one goes at once).
    await core.createNamespacedBinding({
      namespace,
      body: {
        metadata: { name },
        target: { apiVersion: 'v1', kind: 'Node', name: 'node-that-never-answers' },
      },
    });
    for (let i = 0; i < 3; i++) await logged.delete(id);
    const deleting = await core.readNamespacedPod({ name, namespace });
    expect(deleting.metadata?.deletionTimestamp).toBeDefined();
    expect((await logged.get(id)).state).toBe('Terminated');
    const deletions = lines.filter((l) => l.includes('proxy pod deletion requested'));
    expect(deletions).toHaveLength(1);
    expect(JSON.parse(deletions[0])).toMatchObject({ providerID: id, graceSeconds: SQUID_GRACE_SECONDS });
    await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
  });

  it("lists only the Pods it labelled with its own owner identity, never another operator's", async () => {
    await core.createNamespacedPod({
      namespace,
      body: { metadata: { name: 'unrelated' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    });
    const uid = 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee';
    const id = await provider.create(request(uid));
    const theirs = await provider.create({
      ...request('cccccccc-bbbb-4ccc-8ddd-eeeeeeeeeeee'),
      owner: 'other-cluster',
    });
    const listed = await provider.listByTag('test-owner');
    expect(listed.map((i) => [i.id, i.uid, i.owner, i.namespace])).toEqual([
      [id, uid, 'test-owner', namespace],
    ]);
    expect((await provider.listByTag('other-cluster')).map((i) => i.id)).toEqual([theirs]);
    await provider.delete(theirs);
    expect(listed[0].createdAt.getTime()).toBeGreaterThan(Date.now() - 10 * 60_000);
    await provider.delete(id);
  });

  it('refuses to adopt a Pod of that name owned by another Proxy', async () => {
    const uid = '99999999-8888-4777-8666-555555555555';
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: instanceName(uid), labels: { 'proxy-operator-uid': 'someone-else' } },
        spec: { containers: [{ name: 'c', image: 'busybox' }] },
      },
    });
    const err = await caught(provider.create(request(uid)));
    expect(isPermanent(err)).toBe(true);
    expect((err as Error).message).toContain('already exists for another Proxy');
  });

  it('fails Permanent, naming the namespace, when the namespace does not exist', async () => {
    const orphan = new KubernetesProvider(
      'kubernetes',
      { namespace: 'no-such-namespace', image: 'ubuntu/squid' },
      logger,
      testKubeConfig(),
    );
    const err = await caught(orphan.create(request('12345678-1234-4123-8123-123456789012')));
    expect(isPermanent(err)).toBe(true);
    expect((err as Error).message).toContain('namespace "no-such-namespace" does not exist');
  });

  it('says NotFound for a Pod that never existed', async () => {
    expect(isNotFound(await caught(provider.get(`${namespace}/proxy-000000000000`)))).toBe(true);
  });
});
