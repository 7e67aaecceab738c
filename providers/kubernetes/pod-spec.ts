import type { V1Pod } from '@kubernetes/client-node';
import { gcLabels, type CreateRequest } from '../contract.js';
import { instanceName } from '../naming.js';
import type { KubernetesSettings } from './config.js';

/** Annotation naming the owning Proxy, for humans: label values cannot hold "/". */
export const OWNER_ANNOTATION = 'crawl.example.com/owner';
/** Squid's default port in ubuntu/squid's stock configuration. */
export const SQUID_DEFAULT_PORT = 3128;

/**
 * The Squid command for a port other than the image's default: append an http_port line,
 * then run the image's own entrypoint the way its CMD does.
 */
function squidCommand(
  port: number,
): Pick<NonNullable<V1Pod['spec']>['containers'][number], 'command' | 'args'> {
  if (port === SQUID_DEFAULT_PORT) return {};
  return {
    command: ['/bin/sh', '-c'],
    args: [
      `echo "http_port ${port}" >> /etc/squid/squid.conf && exec entrypoint.sh -f /etc/squid/squid.conf -NYC`,
    ],
  };
}

/** The Pod for a Proxy: named from its UID, GC-labelled, Ready once Squid accepts on the port. */
export function buildPod(req: CreateRequest, settings: KubernetesSettings): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: instanceName(req.uid, req.revision),
      namespace: settings.namespace,
      labels: {
        ...gcLabels(req),
        'app.kubernetes.io/name': 'squid',
        'app.kubernetes.io/managed-by': 'proxy-operator',
      },
      annotations: { [OWNER_ANNOTATION]: req.proxy },
    },
    spec: {
      restartPolicy: 'Always',
      containers: [
        {
          name: 'squid',
          image: settings.image,
          ...squidCommand(req.port),
          ports: [{ name: 'proxy', containerPort: req.port, protocol: 'TCP' }],
          readinessProbe: { tcpSocket: { port: req.port }, periodSeconds: 5 },
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
        },
      ],
    },
  };
}
