import { Chart } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import type { Construct } from 'constructs';
import {
  APP_LABELS,
  OPERATOR_NAMESPACE,
  REDIS_IMAGE,
  REDIS_PORT,
  REDIS_SAMPLE_NAME,
  REDIS_SECRET_NAME,
  REDIS_SECRET_PASSWORD_KEY,
} from './names.js';

const REDIS_LABELS = {
  'app.kubernetes.io/name': 'redis',
  'app.kubernetes.io/part-of': 'proxy-operator',
} as const;

/**
 * dist/redis-sample.yaml: a single Redis for the kind quickstart of the Redis lease store
 * (dist/operator-redis.yaml points at it). Not for production: one replica, an append-only
 * file on an emptyDir (it survives a container restart, not the Pod's deletion). It requires
 * the password of the REDIS_SECRET_NAME Secret (the operator reads the same key), which you
 * create: no password is in any manifest. A NetworkPolicy admits only the operator's Pods.
 * Production uses a managed Redis or a Redis operator: persistence and failover are its job.
 */
/** The data emptyDir's sizeLimit: room for the append-only file at --maxmemory 200mb and its rewrite. */
export const REDIS_DATA_SIZE_LIMIT = '1Gi';

export class RedisSampleChart extends Chart {
  constructor(scope: Construct, id: string) {
    super(scope, id, { labels: APP_LABELS });
    const metadata = { name: REDIS_SAMPLE_NAME, namespace: OPERATOR_NAMESPACE };
    new kplus.k8s.KubeDeployment(this, 'redis', {
      metadata,
      spec: {
        replicas: 1,
        // One Redis: the old Pod goes before the new one takes the volume's place.
        strategy: { type: 'Recreate' },
        selector: { matchLabels: { ...REDIS_LABELS } },
        template: {
          metadata: { labels: { ...REDIS_LABELS } },
          spec: {
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 999,
              runAsGroup: 999,
              fsGroup: 999,
              seccompProfile: { type: 'RuntimeDefault' },
            },
            // Redis never talks to the API server.
            automountServiceAccountToken: false,
            containers: [
              {
                name: 'redis',
                image: REDIS_IMAGE,
                // The kubelet expands $(REDIS_PASSWORD) from the env below (a Secret), so the
                // password is in no manifest; redis-cli (the probe) reads REDISCLI_AUTH.
                args: [
                  '--requirepass',
                  '$(REDIS_PASSWORD)',
                  '--appendonly',
                  'yes',
                  '--dir',
                  '/data',
                  // A lease book wants no eviction: an evicted lease key is a lost lease.
                  '--maxmemory',
                  '200mb',
                  '--maxmemory-policy',
                  'noeviction',
                ],
                env: ['REDIS_PASSWORD', 'REDISCLI_AUTH'].map((name) => ({
                  name,
                  valueFrom: { secretKeyRef: { name: REDIS_SECRET_NAME, key: REDIS_SECRET_PASSWORD_KEY } },
                })),
                ports: [{ name: 'redis', containerPort: REDIS_PORT }],
                readinessProbe: { exec: { command: ['redis-cli', 'ping'] }, periodSeconds: 5 },
                livenessProbe: {
                  tcpSocket: { port: kplus.k8s.IntOrString.fromNumber(REDIS_PORT) },
                  periodSeconds: 10,
                },
                resources: {
                  requests: {
                    cpu: kplus.k8s.Quantity.fromString('50m'),
                    memory: kplus.k8s.Quantity.fromString('64Mi'),
                  },
                  limits: { memory: kplus.k8s.Quantity.fromString('256Mi') },
                },
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ['ALL'] },
                  seccompProfile: { type: 'RuntimeDefault' },
                },
                volumeMounts: [{ name: 'data', mountPath: '/data' }],
              },
            ],
            // Bounded: the append-only file of a 200 MB book grows to about twice that before
            // Redis rewrites it, and the rewrite writes a copy beside it.
            volumes: [
              { name: 'data', emptyDir: { sizeLimit: kplus.k8s.Quantity.fromString(REDIS_DATA_SIZE_LIMIT) } },
            ],
          },
        },
      },
    });
    new kplus.k8s.KubeService(this, 'redis-service', {
      metadata,
      spec: {
        selector: { ...REDIS_LABELS },
        ports: [
          { name: 'redis', port: REDIS_PORT, targetPort: kplus.k8s.IntOrString.fromNumber(REDIS_PORT) },
        ],
      },
    });
    // Only the operator's Pods (controller and discovery; both carry APP_LABELS) reach Redis.
    new kplus.k8s.KubeNetworkPolicy(this, 'redis-network-policy', {
      metadata,
      spec: {
        podSelector: { matchLabels: { ...REDIS_LABELS } },
        policyTypes: ['Ingress'],
        ingress: [
          {
            from: [{ podSelector: { matchLabels: { ...APP_LABELS } } }],
            ports: [{ protocol: 'TCP', port: kplus.k8s.IntOrString.fromNumber(REDIS_PORT) }],
          },
        ],
      },
    });
  }
}
