import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

/** The owner identity's default comes from this Namespace: every cluster has it, and its UID never changes. */
export const CLUSTER_ID_NAMESPACE = 'kube-system';

export class ClusterNameError extends Error {}

/**
 * The owner identity labelled on every instance this operator creates: `--cluster-name` when
 * given, else the UID of the kube-system Namespace (stable for the cluster's life, distinct
 * between clusters). A failure to read it stops start-up naming the flag: guessing a constant
 * would let two clusters' sweeps delete each other's instances.
 */
export async function resolveClusterName(
  given: string | undefined,
  readUID: () => Promise<string | undefined>,
): Promise<string> {
  if (given !== undefined) return given;
  let uid: string | undefined;
  try {
    uid = await readUID();
  } catch (err) {
    throw new ClusterNameError(
      `cannot read the UID of the ${CLUSTER_ID_NAMESPACE} Namespace, the default --cluster-name (${(err as Error).message}); ` +
        `grant get on namespaces/${CLUSTER_ID_NAMESPACE} or set --cluster-name (env CLUSTER_NAME)`,
    );
  }
  if (!uid)
    throw new ClusterNameError(
      `the ${CLUSTER_ID_NAMESPACE} Namespace has no UID to use as the default --cluster-name; set --cluster-name (env CLUSTER_NAME)`,
    );
  return uid;
}

/** Reads the kube-system Namespace's UID, giving up after `timeoutMs`. */
export async function kubeSystemUID(kubeConfig: KubeConfig, timeoutMs = 15_000): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs / 1000} s`)), timeoutMs);
  });
  try {
    const ns = await Promise.race([
      kubeConfig.makeApiClient(CoreV1Api).readNamespace({ name: CLUSTER_ID_NAMESPACE }),
      timeout,
    ]);
    return ns.metadata?.uid;
  } finally {
    clearTimeout(timer);
  }
}
