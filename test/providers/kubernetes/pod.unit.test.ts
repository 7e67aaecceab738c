import { ApiException, type V1Pod } from '@kubernetes/client-node';
import type { CreateRequest } from '../../../providers/contract.js';
import { classifyKubeError, messageOf } from '../../../providers/kubernetes/error-mapping.js';
import { KUBERNETES_DEFAULTS } from '../../../providers/kubernetes/config.js';
import { OWNER_ANNOTATION, buildPod } from '../../../providers/kubernetes/pod-spec.js';
import { podState, toInstance } from '../../../providers/kubernetes/pod-view.js';
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
    expect(container.command).toBeUndefined();
  });

  it('tells Squid to listen on a non-default port', () => {
    const [container] = buildPod({ ...req, port: 8080 }, KUBERNETES_DEFAULTS).spec!.containers;
    expect(container.args?.join(' ')).toContain('http_port 8080');
    expect(container.readinessProbe).toMatchObject({ tcpSocket: { port: 8080 } });
  });

  const pod = (status: V1Pod['status'], deleting = false): V1Pod => ({
    metadata: { deletionTimestamp: deleting ? new Date() : undefined },
    status,
  });
  const ready = [{ type: 'Ready', status: 'True' }];

  it.each([
    ['no status yet', pod(undefined), 'Provisioning'],
    ['Pending', pod({ phase: 'Pending' }), 'Provisioning'],
    [
      'Running but not Ready',
      pod({ phase: 'Running', conditions: [{ type: 'Ready', status: 'False' }] }),
      'Provisioning',
    ],
    ['Running and Ready', pod({ phase: 'Running', conditions: ready }), 'Running'],
    ['Failed', pod({ phase: 'Failed' }), 'Terminated'],
    ['Succeeded', pod({ phase: 'Succeeded' }), 'Terminated'],
    ['being deleted', pod({ phase: 'Running', conditions: ready }, true), 'Terminated'],
  ])('%s is %s', (_case, p, state) => {
    expect(podState(p)).toBe(state);
  });

  it('as an instance: namespace/name ID, Pod IP, GC labels, creation time', () => {
    const created = new Date('2026-01-01T00:00:00Z');
    expect(
      toInstance({
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
      }),
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
