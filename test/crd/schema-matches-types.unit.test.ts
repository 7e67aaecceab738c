import type { JSONSchemaProps } from '../../crds/openapi-schema.js';
import { proxyCrd } from '../../crds/proxy-crd.js';
import type {
  CloudInitSpec,
  Condition,
  EndpointSpec,
  LocalSecretReference,
  HealthCheckSpec,
  PlacementSpec,
  ProxySpec,
  ProxyStatus,
  ReplacementStatus,
  RotationSpec,
  SecretKeySelector,
} from '../../crds/proxy-types.js';

// How each TypeScript property must appear in the schema. The mapped type makes the compiler
// demand every key of the interface and no other, and forbids calling a property the TS type
// marks optional 'required' or 'defaulted' (and vice versa): the schema and the types cannot drift.
type Presence = 'required' | 'defaulted' | 'optional';
type PresenceOf<T> = {
  [K in keyof T]-?: undefined extends T[K] ? 'optional' : Exclude<Presence, 'optional'>;
};

const spec = {
  mode: 'required',
  provider: 'optional',
  placement: 'optional',
  cloudInit: 'optional',
  endpoint: 'optional',
  port: 'defaulted',
  attributes: 'optional',
  healthCheck: 'defaulted',
  maxLeases: 'defaulted',
  rotation: 'defaulted',
} satisfies PresenceOf<ProxySpec>;

const rotation = {
  unhealthyAfterSeconds: 'optional',
  maxAgeSeconds: 'optional',
  whenCoolingDownOn: 'optional',
} satisfies PresenceOf<RotationSpec>;

const healthCheck = {
  probeURL: 'defaulted',
  intervalSeconds: 'defaulted',
  timeoutSeconds: 'defaulted',
  failureThreshold: 'defaulted',
  successThreshold: 'defaulted',
  expectedStatusCodes: 'defaulted',
  exitIPURL: 'optional',
} satisfies PresenceOf<HealthCheckSpec>;

const placement = {
  region: 'optional',
  zone: 'optional',
  machineType: 'optional',
  image: 'optional',
} satisfies PresenceOf<PlacementSpec>;
const cloudInit = { inline: 'optional', secretRef: 'optional' } satisfies PresenceOf<CloudInitSpec>;
const secretRef = { name: 'required', key: 'required' } satisfies PresenceOf<SecretKeySelector>;
const endpoint = {
  host: 'required',
  port: 'required',
  credentialsSecretRef: 'optional',
} satisfies PresenceOf<EndpointSpec>;
const credentialsSecretRef = { name: 'required' } satisfies PresenceOf<LocalSecretReference>;

const status = {
  phase: 'optional',
  providerID: 'optional',
  ip: 'optional',
  conditions: 'optional',
  lastHealthCheckTime: 'optional',
  latencyMillis: 'optional',
  exitIP: 'optional',
  observedGeneration: 'optional',
  replacement: 'optional',
} satisfies PresenceOf<ProxyStatus>;

const replacement = {
  cause: 'required',
  startedAt: 'required',
  oldInstanceGoneAt: 'optional',
} satisfies PresenceOf<ReplacementStatus>;

const condition = {
  type: 'required',
  status: 'required',
  reason: 'required',
  message: 'required',
  lastTransitionTime: 'required',
  observedGeneration: 'optional',
} satisfies PresenceOf<Condition>;

const root = proxyCrd.spec.versions[0].schema.openAPIV3Schema;

/** The schema node at a dotted path of property names; `[]` steps into array items. */
function schemaAt(path: string): JSONSchemaProps {
  let node = root;
  for (const step of path.split('.')) {
    const next = step === '[]' ? node.items : node.properties?.[step];
    if (!next) throw new Error(`the schema has no ${path} (stopped at ${step})`);
    node = next;
  }
  return node;
}

const objects: [string, string, Record<string, Presence>][] = [
  ['ProxySpec', 'spec', spec],
  ['HealthCheckSpec', 'spec.healthCheck', healthCheck],
  ['PlacementSpec', 'spec.placement', placement],
  ['CloudInitSpec', 'spec.cloudInit', cloudInit],
  ['SecretKeySelector', 'spec.cloudInit.secretRef', secretRef],
  ['EndpointSpec', 'spec.endpoint', endpoint],
  ['LocalSecretReference', 'spec.endpoint.credentialsSecretRef', credentialsSecretRef],
  ['RotationSpec', 'spec.rotation', rotation],
  ['ProxyStatus', 'status', status],
  ['ReplacementStatus', 'status.replacement', replacement],
  ['Condition', 'status.conditions.[]', condition],
];

const fields = objects.flatMap(([type, path, presence]) =>
  Object.entries(presence).map(([key, how]) => [`${type}.${key}`, how, path, key] as const),
);

describe('the Proxy schema and the TypeScript types', () => {
  it.each(objects)('%s has exactly the properties of the schema at %s', (_type, path, presence) => {
    expect(Object.keys(schemaAt(path).properties ?? {}).sort()).toEqual(Object.keys(presence).sort());
  });

  it.each(fields)('%s is %s in the schema', (_name, how, path, key) => {
    const parent = schemaAt(path);
    const required = parent.required?.includes(key) ?? false;
    const defaulted = parent.properties?.[key]?.default !== undefined;
    expect({ required, defaulted }).toEqual({ required: how === 'required', defaulted: how === 'defaulted' });
  });

  it('gives every property a description, so `kubectl explain` documents the whole resource', () => {
    const undocumented: string[] = [];
    const walk = (node: JSONSchemaProps, path: string) => {
      for (const [key, child] of Object.entries(node.properties ?? {})) {
        if (!child.description && !(path === '' && key === 'metadata')) undocumented.push(`${path}${key}`);
        walk(child.items ?? child, `${path}${key}.`);
      }
    };
    walk(root, '');
    expect(undocumented).toEqual([]);
  });
});
