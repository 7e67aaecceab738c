// The Proxy object the state machine's table tests start from: a Managed mock proxy with the
// CRD's defaults filled in; each test says only the metadata, spec and status it is about.
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  SPEC_HASH_ANNOTATION,
  type Proxy,
  type ProxySpec,
  type ProxyStatus,
} from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';

/** The tables' clock: every time in a row is this moment or some seconds before it. */
export const NOW = new Date('2026-03-01T12:00:00Z');
export const ago = (seconds: number): string => new Date(NOW.getTime() - seconds * 1000).toISOString();

export interface StateMachineProxy {
  generation?: number;
  annotations?: Record<string, string>;
  /** Merged over the Managed defaults; a key set to undefined is left out (e.g. `provider`). */
  spec?: Partial<ProxySpec>;
  status: ProxyStatus;
}

export function stateMachineProxy({
  generation = 1,
  annotations = {},
  spec = {},
  status,
}: StateMachineProxy): Proxy {
  const merged = {
    mode: 'Managed',
    provider: 'mock',
    port: 3128,
    maxLeases: 5,
    healthCheck: {
      probeURL: 'http://127.0.0.1/x',
      intervalSeconds: 30,
      timeoutSeconds: 5,
      failureThreshold: 3,
      successThreshold: 1,
      expectedStatusCodes: [204],
    },
    rotation: {},
    ...spec,
  };
  return {
    apiVersion: 'crawl.example.com/v1alpha1',
    kind: 'Proxy',
    metadata: { name: 'p', namespace: 'ns', uid: 'u-1', generation, annotations },
    spec: Object.fromEntries(
      Object.entries(merged).filter(([, v]) => v !== undefined),
    ) as unknown as ProxySpec,
    status,
  };
}

/** The instance the provider reports for that proxy (i-1 at 10.0.0.7, revision h1); `extra` overrides. */
export function stateMachineInstance(
  state: Instance['state'] = 'Running',
  extra: Partial<Instance> = {},
): Instance {
  return {
    id: 'i-1',
    ip: '10.0.0.7',
    state,
    uid: 'u-1',
    owner: 'o',
    namespace: 'ns',
    revision: 'h1',
    createdAt: new Date(0),
    ...extra,
  };
}

/** A proxy Ready for ten minutes on instance i-1, built for revision `hash`. */
export function readyStateMachineProxy(hash = 'h1'): Proxy {
  return stateMachineProxy({
    annotations: { [SPEC_HASH_ANNOTATION]: hash },
    status: {
      phase: 'Ready',
      providerID: 'i-1',
      ip: '10.0.0.7',
      observedGeneration: 1,
      conditions: [
        {
          type: CONDITION_PROVISIONED,
          status: 'True',
          reason: 'InstanceRunning',
          message: '',
          lastTransitionTime: ago(600),
        },
        {
          type: CONDITION_HEALTHY,
          status: 'True',
          reason: 'ProbeSucceeded',
          message: 'm',
          lastTransitionTime: ago(600),
        },
      ],
    },
  });
}
