// The Proxy custom resource's TypeScript shape. The OpenAPI schema in proxy-crd.ts is
// written against these types: change both together (a test compares them).

export const GROUP = 'crawl.example.com';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = 'Proxy';
export const PLURAL = 'proxies';
export const SINGULAR = 'proxy';
export const SHORT_NAME = 'px';

export type ProvisioningMode = 'Managed' | 'External';
export type ProxyPhase = 'Pending' | 'Provisioning' | 'Ready' | 'Unhealthy' | 'Deleting' | 'Failed';
export const PROXY_PHASES: readonly ProxyPhase[] = [
  'Pending',
  'Provisioning',
  'Ready',
  'Unhealthy',
  'Deleting',
  'Failed',
];

export interface PlacementSpec {
  region?: string;
  zone?: string;
  machineType?: string;
  image?: string;
}

export interface SecretKeySelector {
  name: string;
  key: string;
}

export interface CloudInitSpec {
  inline?: string;
  secretRef?: SecretKeySelector;
}

/** A Secret in the Proxy's namespace (for credentials: a kubernetes.io/basic-auth one). */
export interface LocalSecretReference {
  name: string;
}

export interface EndpointSpec {
  host: string;
  port: number;
  /** Basic-auth credentials the external proxy requires (username and password keys). */
  credentialsSecretRef?: LocalSecretReference;
}

export interface HealthCheckSpec {
  probeURL: string;
  intervalSeconds: number;
  timeoutSeconds: number;
  failureThreshold: number;
  successThreshold: number;
  expectedStatusCodes: number[];
  /** An echo service answering with the caller's address; set = status.exitIP is recorded. */
  exitIPURL?: string;
}

/**
 * The autopilot's policies for one proxy. Stored with every default the schema has; a field
 * with no schema default falls back to a fleet-wide flag (the schema cannot know the flag).
 */
export interface RotationSpec {
  /**
   * Replace a Managed proxy that has been Unhealthy this long (seconds); 0 = never. Unset = the
   * fleet's `--replace-unhealthy-after`. External proxies only get an Event.
   */
  unhealthyAfterSeconds?: number;
  /**
   * Replace a Managed instance once it is this old (seconds since it came up), up to 10 %
   * earlier by a per-instance jitter, after draining it (no new leases, live leases finish,
   * `--rotation-drain-timeout`). Unset or 0 = never.
   */
  maxAgeSeconds?: number;
  /**
   * Rotate once the proxy cools down on at least this many targets at once (bans reported
   * through the discovery API): a Managed proxy is drained and replaced like a rotation on
   * age; an External one gets `Provisioned` reason `RotationDue` and a Warning Event. Unset = never.
   */
  whenCoolingDownOn?: number;
}

export interface ProxySpec {
  mode: ProvisioningMode;
  provider?: string;
  placement?: PlacementSpec;
  cloudInit?: CloudInitSpec;
  endpoint?: EndpointSpec;
  port: number;
  attributes?: Record<string, string>;
  /** Always present as stored: the API server applies every default. */
  healthCheck: HealthCheckSpec;
  maxLeases: number;
  /** Always present as stored (`default: {}`). */
  rotation: RotationSpec;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

/** Why a proxy that served is being replaced: a closed set, so metrics and Events stay countable. */
export const REPLACEMENT_CAUSES = [
  'SpecChanged',
  'InstanceDead',
  'InstanceGone',
  'Unhealthy',
  'Rotation',
] as const;
export type ReplacementCause = (typeof REPLACEMENT_CAUSES)[number];

/**
 * A replacement of a proxy that had served (Ready or Unhealthy), from its start until the new
 * instance is Ready. It holds one of the provider's --max-unavailable slots the whole time,
 * a permanently failed create included: that is what stops a bad image after the cap.
 */
export interface ReplacementStatus {
  cause: ReplacementCause;
  /** When the old instance was taken out of service. */
  startedAt: string;
  /**
   * When the old instance was found gone: from then on the instance is its replacement. Instance
   * names are deterministic (the same name again for the same revision), so this, not the
   * instance's ID, tells a rotation's drained instance from the new one.
   */
  oldInstanceGoneAt?: string;
}

export interface ProxyStatus {
  phase?: ProxyPhase;
  providerID?: string;
  ip?: string;
  conditions?: Condition[];
  lastHealthCheckTime?: string;
  latencyMillis?: number;
  /** The proxy's egress address as spec.healthCheck.exitIPURL last saw it. */
  exitIP?: string;
  observedGeneration?: number;
  replacement?: ReplacementStatus;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}

export interface Proxy {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: ObjectMeta;
  spec: ProxySpec;
  status?: ProxyStatus;
}

/** Condition types the operator maintains. */
export const CONDITION_PROVISIONED = 'Provisioned';
export const CONDITION_HEALTHY = 'Healthy';
export type ConditionType = typeof CONDITION_PROVISIONED | typeof CONDITION_HEALTHY;

/** Why `Provisioned` is what it is: a closed set, so a typo is a compile error, not a new reason. */
export const PROVISIONED_REASONS = [
  /** External proxies: provisioned outside the operator. */
  'External',
  /** The instance was submitted to the provider. */
  'Creating',
  'InstanceProvisioning',
  /** The instance exists but is not starting; the message quotes the provider (e.g. ImagePullBackOff). */
  'InstanceNotStarting',
  'InstanceRunning',
  /** The old instance is being deleted (spec drift or a dead instance); a new one follows. */
  'Replacing',
  /**
   * spec.rotation.maxAgeSeconds passed: the proxy is drained (no new leases, live ones finish)
   * before its instance is replaced; it holds a --max-unavailable slot.
   */
  'Draining',
  /** A spec change wants a replacement, but --max-unavailable replacements are in flight. */
  'ReplacementPending',
  /**
   * An External proxy cools down on spec.rotation.whenCoolingDownOn targets or more: its owner
   * must give it a new IP (the operator cannot).
   */
  'RotationDue',
  /**
   * Like ReplacementPending, but slots are held by replacements that failed permanently: the
   * rollout is stopped until their spec changes or a person acts; the message names them.
   */
  'ReplacementBlocked',
  /**
   * The proxy is Unhealthy past its grace, or its spec changed, but its repair holds: the probe
   * target fails when checked directly, or too many of the provider's proxies are Unhealthy at
   * once (a shared cause); the message says which, and what a spec change waits on. The
   * instance is kept.
   */
  'RepairHeld',
  /** Instances of revisions a crash left behind are being deleted before the new one is created. */
  'CleaningUp',
  /** The instance disappeared at the provider; a new one is created. */
  'InstanceGone',
  'CloudInitError',
  /** The credentials Secret cannot be read or made (missing keys, unlabelled, a bad username). */
  'CredentialsError',
  'QuotaExceeded',
  /** Any provider error that is retried with backoff (permissions, timeouts, a not-ready cloud). */
  'ProviderError',
  /** The provider said retrying cannot help; fixed by a spec change or the annotation (README). */
  'ProvisioningFailed',
  /** As ProvisioningFailed, for a proxy that had served: it keeps its --max-unavailable slot. */
  'ReplacementFailed',
  /** spec.provider names no configured provider; retried slowly, heals after a config fix and restart. */
  'UnknownProvider',
] as const;
export type ProvisionedReason = (typeof PROVISIONED_REASONS)[number];

/** Why `Healthy` is what it is: the probe engine's reasons plus the operator's own. */
export const HEALTHY_REASONS = [
  'AwaitingProbe',
  /** The probe target cannot be built from the spec and status (e.g. an IPv6 zone id). */
  'InvalidProbeTarget',
  'ProbeSucceeded',
  'ConnectionRefused',
  'ProxyUnreachable',
  'ProxyTimeout',
  'TunnelFailed',
  'UnexpectedStatus',
  /** The proxy answered 407: it wants credentials the operator lacks or has wrong. */
  'ProxyAuthenticationRequired',
  /** The credentials Secret is missing, unlabelled or unusable; the message says which, never a value. */
  'CredentialsUnavailable',
  /**
   * An External endpoint (or an address its name resolves to) in a range the providers config
   * does not allow (loopback, link-local, metadata, unspecified, the cluster's CIDRs): never
   * probed, never leased; the message names the range.
   */
  'EndpointRefused',
  'ProbeError',
] as const;
export type HealthyReason = (typeof HEALTHY_REASONS)[number];

/** Finalizer held by Managed proxies until their instance is gone. */
export const FINALIZER = 'crawl.example.com/proxy-cleanup';
/** Annotation holding the hash of the spec fields whose change means replacement. */
export const SPEC_HASH_ANNOTATION = 'crawl.example.com/spec-hash';
/** Only Secrets with this label are visible to the operator as cloud-init sources. */
export const CLOUD_INIT_SECRET_LABEL = 'crawl.example.com/cloud-init';
