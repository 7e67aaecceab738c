// The provider contract: what every provider (mock, gcp, kubernetes, and future ones)
// implements. Deliberately minimal; enrich it only when five providers would agree.

/** Labels every provider puts on every resource it creates: the orphan sweep's contract. */
export const LABEL_UID = 'proxy-operator-uid';
export const LABEL_MANAGED = 'proxy-operator-managed';
/** The owner identity of the operator that made it (`--cluster-name`): an operator lists only its own. */
export const LABEL_OWNER = 'proxy-operator-owner';
/** The owning Proxy's namespace: an operator never sweeps a namespace it does not watch. */
export const LABEL_NAMESPACE = 'proxy-operator-namespace';
/** The spec revision it was built from: a live Proxy's stale revisions are collectable. */
export const LABEL_REVISION = 'proxy-operator-revision';

/** The GC labels for a create request: set them all, on every resource a provider makes. */
export function gcLabels(req: CreateRequest): Record<string, string> {
  return {
    [LABEL_MANAGED]: 'true',
    [LABEL_UID]: req.uid,
    [LABEL_OWNER]: req.owner,
    [LABEL_NAMESPACE]: req.namespace,
    ...(req.revision ? { [LABEL_REVISION]: req.revision } : {}),
  };
}

/** The ownership an instance carries, read back from its GC labels ('' where one is missing). */
export function ownershipFromLabels(
  labels: Readonly<Record<string, string>> | undefined,
): Pick<Instance, 'uid' | 'owner' | 'namespace' | 'revision'> {
  return {
    uid: labels?.[LABEL_UID] ?? '',
    owner: labels?.[LABEL_OWNER] ?? '',
    namespace: labels?.[LABEL_NAMESPACE] ?? '',
    revision: labels?.[LABEL_REVISION] ?? '',
  };
}

export type InstanceState = 'Provisioning' | 'Running' | 'Stopped' | 'Terminated';

export interface Instance {
  /** Opaque provider resource ID, stored in the Proxy's status.providerID. */
  id: string;
  /** Empty until the provider knows it. */
  ip: string;
  state: InstanceState;
  /** The owning Proxy's UID, read back from the proxy-operator-uid label. */
  uid: string;
  /** The owner identity of the operator that made it (LABEL_OWNER). */
  owner: string;
  /** The owning Proxy's namespace (LABEL_NAMESPACE). */
  namespace: string;
  /** The spec revision it was built from (LABEL_REVISION); '' for an unrevisioned create. */
  revision: string;
  /** When the provider created it: the orphan sweep spares young instances. */
  createdAt: Date;
  /**
   * Why it is in this state, in the provider's own words, when that is not simply "starting"
   * or "running": a Pod's ImagePullBackOff and the kubelet's message, a cloud's stop reason.
   * Shown in the Provisioned condition; absent when there is nothing to say.
   */
  detail?: string;
}

/** Basic-auth credentials a proxy requires of every client (the operator generates them for Managed proxies). */
export interface ProxyCredentials {
  username: string;
  password: string;
}

export interface CreateRequest {
  /** The owning Proxy's UID: names the instance deterministically and tags it. */
  uid: string;
  /**
   * The hash of the spec the instance is built from. It is part of the instance name, so a
   * replacement gets a new providerID and never races the old instance's deletion for its
   * name, while a create repeated for the same spec still finds the same instance.
   */
  revision?: string;
  /** namespace/name of the owning Proxy, for humans reading the cloud console. */
  proxy: string;
  /** The owning Proxy's namespace (LABEL_NAMESPACE; label-safe: a DNS label). */
  namespace: string;
  /** This operator's owner identity (LABEL_OWNER; a label value: [a-z0-9]([-a-z0-9_]*[a-z0-9])?, <= 63). */
  owner: string;
  port: number;
  /**
   * Cloud-init user-data, its credential placeholders already filled in by the operator
   * (crds/proxy-credentials.ts). Secret material: never log it.
   */
  cloudInit?: string;
  /**
   * What the proxy must require of every client. A provider that configures the proxy itself
   * (kubernetes) uses it; cloud providers get it through the cloud-init placeholders. Never log it.
   */
  credentials?: ProxyCredentials;
  placement: { region?: string; zone?: string; machineType?: string; image?: string };
}

export interface Provider {
  /**
   * Starts creating an instance. Idempotent: the instance name derives from req.uid, so a
   * repeat call after a crash finds the existing instance. May return before it runs.
   */
  create(req: CreateRequest, signal?: AbortSignal): Promise<string>;
  /** Current state; throws a NotFoundError (see errors.ts) when it does not exist. */
  get(providerID: string, signal?: AbortSignal): Promise<Instance>;
  /** Idempotent: deleting a missing instance succeeds. */
  delete(providerID: string, signal?: AbortSignal): Promise<void>;
  /**
   * Every instance tagged managed by the operator whose owner identity is `owner` (LABEL_OWNER
   * equal to it), for the orphan sweep. Instances of other owners, and unowned ones made before
   * the owner label existed, are never returned, so never swept.
   */
  listByTag(owner: string, signal?: AbortSignal): Promise<Instance[]>;
}
