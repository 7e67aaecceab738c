import { ApiException, type V1ContainerStatus, type V1Pod } from '@kubernetes/client-node';
import type { CreateRequest } from '../../../providers/contract.js';
import { classifyKubeError, messageOf } from '../../../providers/kubernetes/error-mapping.js';
import { KUBERNETES_DEFAULTS, PRIVATE_CLIENT_RANGES } from '../../../providers/kubernetes/config.js';
import { INTERNAL_DESTINATIONS } from '../../../crds/internal-destinations.js';
import {
  NCSA_AUTH_HELPER,
  OWNER_ANNOTATION,
  SQUID_CONFIG_ENV,
  SQUID_PASSWD_ENV,
  SQUID_PASSWD_FILE,
  SQUID_UID,
  SQUID_WRITABLE_DIRS,
  buildPod,
} from '../../../providers/kubernetes/pod-spec.js';
import { podProblem, podState, toInstance } from '../../../providers/kubernetes/pod-view.js';
import {
  SQUID_GRACE_SECONDS,
  SQUID_SHUTDOWN_SECONDS,
  squidConfig,
} from '../../../providers/kubernetes/squid-config.js';
import { instanceName } from '../../../providers/naming.js';

const UID = '0b5a3c1e-8d2f-4c6a-9e7b-1f2d3c4b5a69';
const req: CreateRequest = {
  uid: UID,
  proxy: 'fleet/p1',
  namespace: 'fleet',
  owner: 'test-owner',
  port: 3128,
  placement: {},
};

describe('the proxy Pod', () => {
  describe('meets the Pod Security "restricted" profile', () => {
    const pod = buildPod(req, { namespace: 'proxies', image: 'ubuntu/squid:6.1' });
    const [container] = pod.spec!.containers;
    const mounts = container.volumeMounts!.map((m) => m.mountPath);
    it.each<[string, () => unknown, unknown]>([
      ['runs as non-root', () => pod.spec!.securityContext!.runAsNonRoot, true],
      ["runs as Squid's own user (proxy, 13)", () => pod.spec!.securityContext!.runAsUser, SQUID_UID],
      [
        'runs with the RuntimeDefault seccomp profile',
        () => pod.spec!.securityContext!.seccompProfile,
        { type: 'RuntimeDefault' },
      ],
      ['cannot escalate privileges', () => container.securityContext!.allowPrivilegeEscalation, false],
      ['drops every capability', () => container.securityContext!.capabilities, { drop: ['ALL'] }],
      ['has a read-only root filesystem', () => container.securityContext!.readOnlyRootFilesystem, true],
      ['is not privileged', () => container.securityContext!.privileged, false],
      ['has no API token', () => pod.spec!.automountServiceAccountToken, false],
      [
        "mounts an emptyDir at squid.conf's folder and every dir Squid writes to",
        () =>
          [...SQUID_WRITABLE_DIRS, SQUID_PASSWD_FILE.replace(/\/passwd$/, '')].every((d) =>
            mounts.includes(d),
          ),
        true,
      ],
      [
        'backs every mount with an emptyDir',
        () => pod.spec!.volumes!.every((v) => v.emptyDir !== undefined),
        true,
      ],
    ])('%s', (_what, actual, expected) => {
      expect(actual()).toEqual(expected);
    });
  });

  it('is named from the UID, GC-labelled, and runs the configured Squid image on the port', () => {
    const pod = buildPod(req, { namespace: 'proxies', image: 'ubuntu/squid:6.1' });
    expect(pod.metadata).toEqual({
      name: instanceName(UID),
      namespace: 'proxies',
      labels: {
        'proxy-operator-uid': UID,
        'proxy-operator-managed': 'true',
        'proxy-operator-owner': 'test-owner',
        'proxy-operator-namespace': 'fleet',
        'app.kubernetes.io/name': 'squid',
        'app.kubernetes.io/managed-by': 'proxy-operator',
      },
      annotations: { [OWNER_ANNOTATION]: 'fleet/p1' },
    });
    const [container] = pod.spec!.containers;
    expect(container).toMatchObject({
      image: 'ubuntu/squid:6.1',
      ports: [{ name: 'proxy', containerPort: 3128, protocol: 'TCP' }],
      readinessProbe: { tcpSocket: { port: 3128 } },
    });
  });

  it('uses an image already on the node: IfNotPresent, never Always, whatever the tag', () => {
    for (const image of ['ubuntu/squid:6.1', 'ubuntu/squid', 'registry.local/squid:latest']) {
      const [container] = buildPod(req, { namespace: 'proxies', image }).spec!.containers;
      expect(container.imagePullPolicy).toBe('IfNotPresent');
    }
  });

  it('ships a default image pinned by digest, its tag kept for the reader', () => {
    expect(KUBERNETES_DEFAULTS.image).toMatch(/^ubuntu\/squid:[^:@]+@sha256:[0-9a-f]{64}$/);
    expect(KUBERNETES_DEFAULTS.image).not.toMatch(/:latest@/);
  });

  it("runs Squid with the provider's own configuration, not the image's default", () => {
    const pod = buildPod(
      { ...req, port: 8080 },
      { namespace: 'proxies', image: 'squid:1', clients: ['10.88.0.0/16'] },
    );
    const [container] = pod.spec!.containers;
    const conf = container.env?.find((e) => e.name === SQUID_CONFIG_ENV)?.value;
    expect(conf).toBe(
      squidConfig({
        port: 8080,
        clients: ['10.88.0.0/16'],
        denyDestinations: { addresses: INTERNAL_DESTINATIONS },
        allowDestinations: [],
      }),
    );
    // The config is written to an emptyDir, then squid is exec'd with it as PID 1.
    expect(container.command?.[2]).toMatch(
      /> \/etc\/proxy-operator\/squid\.conf && exec squid -N .*-f \/etc\/proxy-operator\/squid\.conf$/,
    );
    expect(container.volumeMounts).toContainEqual({ name: 'squid-config', mountPath: '/etc/proxy-operator' });
    expect(pod.spec!.volumes).toContainEqual(
      expect.objectContaining({ name: 'squid-config', emptyDir: expect.anything() }),
    );
    expect(container.readinessProbe).toMatchObject({ tcpSocket: { port: 8080 } });
  });

  it('refuses the internal ranges and the cluster CIDRs, except what is explicitly allowed', () => {
    const pod = buildPod(req, {
      namespace: 'proxies',
      image: 'squid:1',
      clusterCIDRs: ['100.96.0.0/11'],
      allowedDestinations: ['10.1.2.3'],
    });
    const conf = pod.spec!.containers[0].env?.find((e) => e.name === SQUID_CONFIG_ENV)?.value ?? '';
    expect(conf).toContain(
      `acl denied_addresses dst ${[...INTERNAL_DESTINATIONS, '100.96.0.0/11'].join(' ')}\n`,
    );
    expect(conf).toContain('acl allowed_addresses dst 10.1.2.3\n');
    expect(INTERNAL_DESTINATIONS).toEqual(
      expect.arrayContaining([
        '169.254.0.0/16',
        '127.0.0.0/8',
        '10.0.0.0/8',
        '172.16.0.0/12',
        '192.168.0.0/16',
        'fe80::/10',
        'fc00::/7',
      ]),
    );
  });

  it('with credentials, requires basic auth and carries only a salted hash of the password', () => {
    const pod = buildPod(
      { ...req, credentials: { username: 'crawler', password: 'hunter2-but-longer' } },
      { namespace: 'proxies', image: 'squid:1' },
    );
    const [container] = pod.spec!.containers;
    const env = (name: string) => container.env?.find((e) => e.name === name)?.value ?? '';
    expect(env(SQUID_CONFIG_ENV)).toContain(
      `auth_param basic program ${NCSA_AUTH_HELPER} ${SQUID_PASSWD_FILE}\n`,
    );
    expect(env(SQUID_PASSWD_ENV)).toMatch(/^crawler:\$1\$[./0-9A-Za-z]{8}\$[./0-9A-Za-z]{22}$/);
    expect(JSON.stringify(pod)).not.toContain('hunter2-but-longer');
    expect(container.command?.[2]).toContain(`> ${SQUID_PASSWD_FILE} &&`);
  });

  it('without credentials, configures no auth', () => {
    const [container] = buildPod(req, { namespace: 'proxies', image: 'squid:1' }).spec!.containers;
    expect(container.env?.find((e) => e.name === SQUID_CONFIG_ENV)?.value).not.toContain('auth_param');
  });

  it('admits the private Pod-network ranges when no clients are configured', () => {
    const [container] = buildPod(req, { namespace: 'proxies', image: 'squid:1' }).spec!.containers;
    expect(container.env?.[0].value).toContain(`acl clients src ${PRIVATE_CLIENT_RANGES.join(' ')}`);
  });

  it("gives Squid's shutdown room inside the Pod's grace, so a deletion takes seconds", () => {
    const pod = buildPod(req, KUBERNETES_DEFAULTS);
    expect(pod.spec!.terminationGracePeriodSeconds).toBe(SQUID_GRACE_SECONDS);
    expect(SQUID_GRACE_SECONDS).toBeGreaterThan(SQUID_SHUTDOWN_SECONDS);
    expect(SQUID_GRACE_SECONDS).toBeLessThanOrEqual(15);
    expect(pod.spec!.containers[0].env?.[0].value).toContain(
      `shutdown_lifetime ${SQUID_SHUTDOWN_SECONDS} seconds`,
    );
  });
});

describe('a Pod as the provider reports it', () => {
  const created = new Date('2026-01-01T00:00:00Z');
  const at = (seconds: number) => ({
    now: new Date(created.getTime() + seconds * 1000),
    startTimeoutSeconds: 300,
  });
  const pod = (status: V1Pod['status'], deleting = false): V1Pod => ({
    metadata: { creationTimestamp: created, deletionTimestamp: deleting ? new Date() : undefined },
    status,
  });
  const ready = [{ type: 'Ready', status: 'True' }];
  const waiting = (reason: string, message: string, lastState?: V1ContainerStatus['lastState']) =>
    ({
      phase: 'Pending',
      containerStatuses: [
        {
          name: 'squid',
          image: 'x',
          imageID: '',
          ready: false,
          restartCount: 0,
          state: { waiting: { reason, message } },
          lastState,
        },
      ],
    }) satisfies V1Pod['status'];
  const pull = waiting('ImagePullBackOff', 'Back-off pulling image "ubuntu/squid:6.6-24.04_beta"');
  const unschedulable: V1Pod['status'] = {
    phase: 'Pending',
    conditions: [
      {
        type: 'PodScheduled',
        status: 'False',
        reason: 'Unschedulable',
        message: '0/1 nodes are available: 1 Insufficient memory.',
      },
    ],
  };
  const crashLoop: V1Pod['status'] = {
    ...waiting('CrashLoopBackOff', 'back-off 20s restarting failed container=squid', {
      terminated: { exitCode: 1, reason: 'Error', message: 'FATAL: Bungled squid.conf line 3\n' },
    }),
    phase: 'Running',
  };

  it.each([
    ['no status yet', pod(undefined), 10, { state: 'Provisioning' }],
    ['Pending, creating its container', pod(waiting('ContainerCreating', '')), 10, { state: 'Provisioning' }],
    [
      'Running but not Ready',
      pod({ phase: 'Running', conditions: [{ type: 'Ready', status: 'False' }] }),
      10,
      { state: 'Provisioning' },
    ],
    ['Running and Ready', pod({ phase: 'Running', conditions: ready }), 10, { state: 'Running' }],
    [
      'Running and Ready long after the bound',
      pod({ phase: 'Running', conditions: ready }),
      9999,
      { state: 'Running' },
    ],
    [
      'failing to pull its image',
      pod(pull),
      10,
      {
        state: 'Provisioning',
        detail: 'ImagePullBackOff: Back-off pulling image "ubuntu/squid:6.6-24.04_beta"',
      },
    ],
    [
      'unschedulable',
      pod(unschedulable),
      10,
      { state: 'Provisioning', detail: 'Unschedulable: 0/1 nodes are available: 1 Insufficient memory.' },
    ],
    [
      'crash-looping (its last exit is quoted)',
      pod(crashLoop),
      10,
      {
        state: 'Provisioning',
        detail:
          'CrashLoopBackOff: back-off 20s restarting failed container=squid; last exit code 1 (Error): FATAL: Bungled squid.conf line 3',
      },
    ],
    [
      'still pulling past the start bound: like an instance that never boots',
      pod(pull),
      301,
      {
        state: 'Terminated',
        detail:
          'not started within 300 s of its creation (ImagePullBackOff: Back-off pulling image "ubuntu/squid:6.6-24.04_beta")',
      },
    ],
    [
      'still unscheduled past the bound',
      pod(unschedulable),
      301,
      {
        state: 'Terminated',
        detail:
          'not started within 300 s of its creation (Unschedulable: 0/1 nodes are available: 1 Insufficient memory.)',
      },
    ],
    [
      'with no status past the bound',
      pod(undefined),
      301,
      { state: 'Terminated', detail: 'not started within 300 s of its creation' },
    ],
    [
      'crash-looping past the bound (it started: not a boot failure)',
      pod(crashLoop),
      301,
      { state: 'Provisioning', detail: expect.stringMatching(/^CrashLoopBackOff: /) as unknown },
    ],
    [
      'Failed',
      pod({ phase: 'Failed', message: 'evicted' }),
      10,
      { state: 'Terminated', detail: 'the Pod failed: evicted' },
    ],
    ['Succeeded', pod({ phase: 'Succeeded' }), 10, { state: 'Terminated', detail: 'the Pod succeeded' }],
    [
      'being deleted',
      pod({ phase: 'Running', conditions: ready }, true),
      10,
      { state: 'Terminated', detail: 'the Pod is being deleted' },
    ],
  ])('%s', (_case, p, seconds, expected) => {
    expect(podState(p, at(seconds))).toEqual(expected);
  });

  it('names the problem: the scheduler first, then the first waiting container', () => {
    expect(podProblem(pod(undefined))).toBeUndefined();
    expect(podProblem(pod(unschedulable))?.reason).toBe('Unschedulable');
    expect(podProblem(pod(waiting('ErrImagePull', 'pull access denied')))).toEqual({
      reason: 'ErrImagePull',
      message: 'pull access denied',
    });
  });

  it('as an instance: namespace/name ID, Pod IP, GC labels, creation time', () => {
    expect(
      toInstance(
        {
          metadata: {
            name: 'proxy-1',
            namespace: 'ns',
            creationTimestamp: created,
            labels: {
              'proxy-operator-uid': UID,
              'proxy-operator-owner': 'prod',
              'proxy-operator-namespace': 'fleet',
              'proxy-operator-revision': 'abcdef12',
            },
          },
          status: { phase: 'Running', podIP: '10.244.0.7', conditions: ready },
        },
        at(10),
      ),
    ).toEqual({
      id: 'ns/proxy-1',
      ip: '10.244.0.7',
      state: 'Running',
      uid: UID,
      owner: 'prod',
      namespace: 'fleet',
      revision: 'abcdef12',
      createdAt: created,
    });
  });
});

describe('Kubernetes API errors → taxonomy', () => {
  const api = (code: number) =>
    new ApiException(code, 'x', JSON.stringify({ message: `status ${code}` }), {});
  it.each([
    [404, 'get', 'NotFound'],
    [404, 'delete', 'NotFound'],
    [404, 'create', 'Permanent'],
    [409, 'create', 'AlreadyExists'],
    [409, 'delete', 'Transient'],
    [429, 'create', 'Transient'],
    [500, 'get', 'Transient'],
    [503, 'list', 'Transient'],
    [401, 'get', 'Transient'],
    [403, 'create', 'Permanent'],
    [422, 'create', 'Permanent'],
    [400, 'create', 'Permanent'],
  ] as const)('HTTP %i on %s is %s', (code, op, kind) => {
    expect(classifyKubeError(api(code), op)).toBe(kind);
  });

  it('treats network failures as Transient', () => {
    expect(
      classifyKubeError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'get'),
    ).toBe('Transient');
  });

  it("quotes the API server's message", () => {
    expect(messageOf(api(422))).toBe('HTTP 422: status 422');
  });
});
