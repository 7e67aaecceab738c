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

export interface EndpointSpec {
  host: string;
  port: number;
}

export interface HealthCheckSpec {
  probeURL: string;
  intervalSeconds: number;
  timeoutSeconds: number;
  failureThreshold: number;
  successThreshold: number;
  expectedStatusCodes: number[];
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
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface ProxyStatus {
  phase?: ProxyPhase;
  providerID?: string;
  ip?: string;
  conditions?: Condition[];
  lastHealthCheckTime?: string;
  latencyMillis?: number;
  observedGeneration?: number;
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

/** Finalizer held by Managed proxies until their instance is gone. */
export const FINALIZER = 'crawl.example.com/proxy-cleanup';
/** Annotation holding the hash of the spec fields whose change means replacement. */
export const SPEC_HASH_ANNOTATION = 'crawl.example.com/spec-hash';
/** Only Secrets with this label are visible to the operator as cloud-init sources. */
export const CLOUD_INIT_SECRET_LABEL = 'crawl.example.com/cloud-init';
