import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describeProviderConformance } from '../../../providers/conformance/index.js';
import { LABEL_MANAGED, LABEL_UID } from '../../../providers/contract.js';
import { KubernetesProvider } from '../../../providers/kubernetes/kubernetes-provider.js';
import { testKubeConfig, uniqueName } from '../../harness/kube.js';
import { closedPort, startBlackHole, type BlackHole } from '../dead-ends.js';

const logger = pino({ level: 'silent' });
const namespace = uniqueName('k8s-conformance');
const core = () => testKubeConfig().makeApiClient(CoreV1Api);
let blackHole: BlackHole | undefined;

/** A KubeConfig for an API server at a loopback port (a black hole, or nothing at all). */
function kubeConfigAt(port: number): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'dead', server: `https://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'not-a-token' }],
    contexts: [{ name: 'dead', cluster: 'dead', user: 'u' }],
    currentContext: 'dead',
  });
  return kc;
}

const settings = { namespace, image: 'ubuntu/squid' };

function pod(name: string, labels: Record<string, string>): V1Pod {
  return {
    metadata: { name, namespace, labels },
    spec: { containers: [{ name: 'c', image: 'ubuntu/squid' }] },
  };
}

// The real API server: no kubelet runs, so Pods stay Pending (Provisioning) — visibly.
describeProviderConformance({
  name: 'kubernetes',
  provider: async () => {
    await core().createNamespace({ body: { metadata: { name: namespace } } });
    return new KubernetesProvider('kubernetes', settings, logger, testKubeConfig());
  },
  unknownID: `${namespace}/proxy-000000000000`,
  unresponsive: async () => {
    blackHole = await startBlackHole();
    return new KubernetesProvider('kubernetes', settings, logger, kubeConfigAt(blackHole.port));
  },
  failing: async () =>
    new KubernetesProvider('kubernetes', settings, logger, kubeConfigAt(await closedPort())),
  seedForeign: async (owner) => {
    await core().createNamespacedPod({ namespace, body: pod(`foreign-${owner}`, { app: 'not-ours' }) });
    await core().createNamespacedPod({
      namespace,
      body: pod(`unowned-${owner}`, { [LABEL_MANAGED]: 'true', [LABEL_UID]: 'from-before-owners' }),
    });
  },
  provisionsVisibly: true,
  teardown: async () => {
    await blackHole?.close();
    await core()
      .deleteNamespace({ name: namespace })
      .catch(() => undefined);
  },
});
