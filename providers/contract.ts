// The provider contract: what every provider (mock, gcp, kubernetes, and future ones)
// implements. Deliberately minimal; enrich it only when five providers would agree.

/** Labels every provider puts on every resource it creates: the orphan sweep's contract. */
export const LABEL_UID = 'proxy-operator-uid';
export const LABEL_MANAGED = 'proxy-operator-managed';

export type InstanceState = 'Provisioning' | 'Running' | 'Stopped' | 'Terminated';

export interface Instance {
  /** Opaque provider resource ID, stored in the Proxy's status.providerID. */
  id: string;
  /** Empty until the provider knows it. */
  ip: string;
  state: InstanceState;
  /** The owning Proxy's UID, read back from the proxy-operator-uid label. */
  uid: string;
  /** When the provider created it: the orphan sweep spares young instances. */
  createdAt: Date;
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
  owner: string;
  port: number;
  cloudInit?: string;
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
  /** Every instance this operator ever tagged, for the orphan sweep. */
  listByTag(signal?: AbortSignal): Promise<Instance[]>;
}
