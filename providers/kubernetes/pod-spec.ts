import type { V1Pod } from '@kubernetes/client-node';
import { gcLabels, type CreateRequest } from '../contract.js';
import { instanceName } from '../naming.js';
import { KUBERNETES_DEFAULTS, type KubernetesSettings } from './config.js';
import { md5Crypt } from './md5-crypt.js';
import { SQUID_GRACE_SECONDS, squidConfig, type SquidAuth } from './squid-config.js';

/** Annotation naming the owning Proxy, for humans: label values cannot hold "/". */
export const OWNER_ANNOTATION = 'crawl.example.com/owner';
/** Where the generated squid.conf is written inside the Pod (an emptyDir). */
export const SQUID_CONFIG_DIR = '/etc/proxy-operator';
/** The environment variable carrying squid.conf into the container. */
export const SQUID_CONFIG_ENV = 'SQUID_CONF';
/** The environment variable carrying the NCSA passwd line (`user:$1$salt$hash`, never the password). */
export const SQUID_PASSWD_ENV = 'SQUID_PASSWD';
/** Debian's and Ubuntu's path of Squid's NCSA basic-auth helper (package squid). */
export const NCSA_AUTH_HELPER = '/usr/lib/squid/basic_ncsa_auth';
export const SQUID_PASSWD_FILE = `${SQUID_CONFIG_DIR}/passwd`;
/**
 * The uid and gid Squid runs as: the `proxy` user of Debian and Ubuntu (and the ubuntu/squid
 * image), which owns Squid's own directories. Never root: the Pod meets the Pod Security
 * "restricted" profile.
 */
export const SQUID_UID = 13;
/**
 * Where Squid may still write with a read-only root filesystem (each an emptyDir): its run
 * dir (IPC sockets), spool (its working directory for core dumps), log and cache dirs. The
 * generated squid.conf writes no PID file, no access log and no cache to disk.
 */
export const SQUID_WRITABLE_DIRS = [
  '/var/run/squid',
  '/var/spool/squid',
  '/var/log/squid',
  '/var/cache/squid',
] as const;
/** The realm a 407 names. */
export const SQUID_REALM = 'proxy-operator';

/** Squid's basic auth against the passwd file the Pod writes. */
export const SQUID_AUTH: SquidAuth = { helper: [NCSA_AUTH_HELPER, SQUID_PASSWD_FILE], realm: SQUID_REALM };

/**
 * Write the configuration the provider generated, then become Squid: `exec` makes squid PID 1
 * so the kubelet's SIGTERM reaches it (a shell or an entrypoint script in between would sit
 * on the signal until the grace ran out). -N: stay in the foreground; -d 1: log to stderr.
 */
const SQUID_START = `printf '%s\\n' "$${SQUID_PASSWD_ENV}" > ${SQUID_PASSWD_FILE} && printf '%s' "$${SQUID_CONFIG_ENV}" > ${SQUID_CONFIG_DIR}/squid.conf && exec squid -N -d 1 -f ${SQUID_CONFIG_DIR}/squid.conf`;

/** The refused destination ranges and their explicit exceptions, from the settings. */
export function destinationRules(settings: KubernetesSettings): {
  denyDestinations: { addresses: readonly string[] };
  allowDestinations: readonly string[];
} {
  return {
    denyDestinations: {
      addresses: [
        ...(settings.deniedDestinations ?? KUBERNETES_DEFAULTS.deniedDestinations),
        ...(settings.clusterCIDRs ?? []),
      ],
    },
    allowDestinations: settings.allowedDestinations ?? [],
  };
}

/** The Pod for a Proxy: named from its UID, GC-labelled, Ready once Squid accepts on the port. */
export function buildPod(req: CreateRequest, settings: KubernetesSettings): V1Pod {
  const config = squidConfig({
    port: req.port,
    clients: settings.clients ?? KUBERNETES_DEFAULTS.clients,
    ...destinationRules(settings),
    ...(req.credentials ? { auth: SQUID_AUTH } : {}),
  });
  // Only a salted hash reaches the Pod spec; the password stays in the Proxy's Secret.
  const passwd = req.credentials ? `${req.credentials.username}:${md5Crypt(req.credentials.password)}` : '';
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
      terminationGracePeriodSeconds: SQUID_GRACE_SECONDS,
      // Squid Pods never talk to the API server.
      automountServiceAccountToken: false,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: SQUID_UID,
        runAsGroup: SQUID_UID,
        fsGroup: SQUID_UID,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: 'squid',
          image: settings.image,
          // Never a registry round trip for an image the node has (kind load, a mirror, an
          // air-gapped node); an untagged image would otherwise default to Always.
          imagePullPolicy: 'IfNotPresent',
          command: ['/bin/sh', '-c', SQUID_START],
          env: [
            { name: SQUID_CONFIG_ENV, value: config },
            { name: SQUID_PASSWD_ENV, value: passwd },
          ],
          ports: [{ name: 'proxy', containerPort: req.port, protocol: 'TCP' }],
          readinessProbe: { tcpSocket: { port: req.port }, periodSeconds: 2 },
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            privileged: false,
            capabilities: { drop: ['ALL'] },
            seccompProfile: { type: 'RuntimeDefault' },
          },
          volumeMounts: [
            { name: 'squid-config', mountPath: SQUID_CONFIG_DIR },
            ...SQUID_WRITABLE_DIRS.map((dir, i) => ({ name: `squid-writable-${i}`, mountPath: dir })),
          ],
        },
      ],
      volumes: [
        { name: 'squid-config', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
        ...SQUID_WRITABLE_DIRS.map((_dir, i) => ({
          name: `squid-writable-${i}`,
          emptyDir: { medium: 'Memory', sizeLimit: '16Mi' },
        })),
      ],
    },
  };
}
