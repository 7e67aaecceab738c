import { CoreV1Api } from '@kubernetes/client-node';
import { DEFAULTS, LIMITS } from '../../crds/proxy-spec-limits.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { isProxyHost } from '../../crds/endpoint-host.js';
import { rejectionOf } from './api-error.js';
import { BAD_HOSTS, GOOD_HOSTS } from './host-cases.js';
import { installProxyCrd } from './install-proxy-crd.js';
import { ProxyApi } from './proxy-api.js';

const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const namespace = uniqueName('crd-validation');
const proxies = new ProxyApi(kc, namespace);

const managed = { mode: 'Managed', provider: 'mock' };
const external = { mode: 'External', endpoint: { host: 'proxy.example.net', port: 3128 } };
const defaultHealthCheck = {
  probeURL: DEFAULTS.probeURL,
  intervalSeconds: DEFAULTS.intervalSeconds,
  timeoutSeconds: DEFAULTS.timeoutSeconds,
  failureThreshold: DEFAULTS.failureThreshold,
  successThreshold: DEFAULTS.successThreshold,
  expectedStatusCodes: [...DEFAULTS.expectedStatusCodes],
};
const x = (n: number) => 'x'.repeat(n);
const manyAttributes = Object.fromEntries(
  Array.from({ length: LIMITS.attributesMaxProperties + 1 }, (_, i) => [`k${i}`, 'v']),
);

beforeAll(async () => {
  await installProxyCrd(kc);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
});
afterAll(() => core.deleteNamespace({ name: namespace }));

describe('the API server rejects an invalid Proxy', () => {
  // [what is wrong, the manifest's spec (undefined: no spec at all), a substring of the server's message]
  it.each<[string, unknown, string]>([
    ['no spec', undefined, 'spec: Required value'],
    ['no mode', { provider: 'mock' }, 'spec.mode: Required value'],
    ['an unknown mode', { mode: 'Hybrid', provider: 'mock' }, 'spec.mode: Unsupported value: "Hybrid"'],
    ['a mode that is not a string', { mode: 1, provider: 'mock' }, 'spec.mode: Invalid value: "integer"'],
    [
      'Managed without provider',
      { mode: 'Managed' },
      'spec.provider: Required value: spec.provider is required when spec.mode is Managed',
    ],
    [
      'External with a provider',
      { ...external, provider: 'mock' },
      'spec.provider: Forbidden: spec.provider must not be set when spec.mode is External',
    ],
    [
      'External without endpoint',
      { mode: 'External' },
      'spec.endpoint: Required value: spec.endpoint is required when spec.mode is External',
    ],
    [
      'Managed with an endpoint',
      { ...managed, endpoint: external.endpoint },
      'spec.endpoint: Forbidden: spec.endpoint must not be set when spec.mode is Managed',
    ],
    [
      'External with placement',
      { ...external, placement: { zone: 'z' } },
      'spec.placement: Forbidden: spec.placement applies only when spec.mode is Managed',
    ],
    [
      'External with cloudInit',
      { ...external, cloudInit: { inline: '#cloud-config' } },
      'spec.cloudInit: Forbidden: spec.cloudInit applies only when spec.mode is Managed',
    ],
    [
      'a provider name that is not a DNS label',
      { mode: 'Managed', provider: 'GCP_EU' },
      'spec.provider in body should match',
    ],
    ['a provider name over 63 characters', { mode: 'Managed', provider: x(64) }, 'spec.provider: Too long'],
    [
      'an endpoint without host',
      { mode: 'External', endpoint: { port: 3128 } },
      'spec.endpoint.host: Required value',
    ],
    [
      'an endpoint without port',
      { mode: 'External', endpoint: { host: 'p.example.net' } },
      'spec.endpoint.port: Required value',
    ],
    [
      'an endpoint host with spaces',
      { mode: 'External', endpoint: { host: 'bad host', port: 1 } },
      'spec.endpoint.host: Invalid value: "bad host": spec.endpoint.host must be an IPv4 address in dotted decimal',
    ],
    [
      'an endpoint host over 253 characters',
      { mode: 'External', endpoint: { host: x(254), port: 1 } },
      'spec.endpoint.host: Too long',
    ],
    [
      'a credentials Secret name that is not a Secret name',
      { ...external, endpoint: { ...external.endpoint, credentialsSecretRef: { name: 'Proxy_Creds' } } },
      'spec.endpoint.credentialsSecretRef.name: Invalid value: "Proxy_Creds": spec.endpoint.credentialsSecretRef.name must be a Secret name',
    ],
    [
      'a credentials Secret reference without name',
      { ...external, endpoint: { ...external.endpoint, credentialsSecretRef: {} } },
      'spec.endpoint.credentialsSecretRef.name: Required value',
    ],
    [
      'an empty credentials Secret name',
      { ...external, endpoint: { ...external.endpoint, credentialsSecretRef: { name: '' } } },
      'spec.endpoint.credentialsSecretRef.name in body should be at least 1 chars long',
    ],
    [
      'endpoint port 0',
      { mode: 'External', endpoint: { host: 'p.example.net', port: 0 } },
      'spec.endpoint.port in body should be greater than or equal to 1',
    ],
    [
      'endpoint port 65536',
      { mode: 'External', endpoint: { host: 'p.example.net', port: 65536 } },
      'spec.endpoint.port in body should be less than or equal to 65535',
    ],
    ['port 0', { ...managed, port: 0 }, 'spec.port in body should be greater than or equal to 1'],
    ['port 65536', { ...managed, port: 65536 }, 'spec.port in body should be less than or equal to 65535'],
    ['a port that is a string', { ...managed, port: '3128' }, 'spec.port: Invalid value: "string"'],
    [
      'negative maxLeases',
      { ...managed, maxLeases: -1 },
      'spec.maxLeases in body should be greater than or equal to 0',
    ],
    [
      'maxLeases over the maximum',
      { ...managed, maxLeases: LIMITS.maxLeasesMaximum + 1 },
      'spec.maxLeases in body should be less than or equal to 1000',
    ],
    [
      'a rotation max age below 5 minutes',
      { ...managed, rotation: { maxAgeSeconds: 299 } },
      'spec.rotation.maxAgeSeconds must be 0 (off) or at least 300',
    ],
    [
      'a rotation max age over a year',
      { ...managed, rotation: { maxAgeSeconds: LIMITS.maxAgeSecondsMaximum + 1 } },
      'spec.rotation.maxAgeSeconds in body should be less than or equal to 31536000',
    ],
    [
      'rotation on bans at 0 targets (unset is off)',
      { ...managed, rotation: { whenCoolingDownOn: 0 } },
      'spec.rotation.whenCoolingDownOn must be at least 1 (leave it unset for off)',
    ],
    [
      'rotation on bans over the maximum',
      { ...managed, rotation: { whenCoolingDownOn: LIMITS.whenCoolingDownOnMaximum + 1 } },
      'spec.rotation.whenCoolingDownOn in body should be less than or equal to 10000',
    ],
    [
      'cloudInit with both inline and secretRef',
      { ...managed, cloudInit: { inline: '#cloud-config', secretRef: { name: 's', key: 'k' } } },
      'spec.cloudInit must set exactly one of inline or secretRef',
    ],
    [
      'cloudInit with neither inline nor secretRef',
      { ...managed, cloudInit: {} },
      'spec.cloudInit must set exactly one of inline or secretRef',
    ],
    [
      'inline cloudInit over 32 KiB',
      { ...managed, cloudInit: { inline: x(LIMITS.cloudInitInlineMaxLength + 1) } },
      'spec.cloudInit.inline: Too long',
    ],
    [
      'a secretRef without key',
      { ...managed, cloudInit: { secretRef: { name: 's' } } },
      'spec.cloudInit.secretRef.key: Required value',
    ],
    [
      'a secretRef name that is not a DNS subdomain',
      { ...managed, cloudInit: { secretRef: { name: 'My_Secret', key: 'k' } } },
      'spec.cloudInit.secretRef.name in body should match',
    ],
    [
      'a placement zone over 63 characters',
      { ...managed, placement: { zone: x(64) } },
      'spec.placement.zone: Too long',
    ],
    [
      'an empty placement region',
      { ...managed, placement: { region: '' } },
      'spec.placement.region in body should be at least 1 chars long',
    ],
    [
      'a health-check timeout equal to the interval',
      { ...managed, healthCheck: { intervalSeconds: 5, timeoutSeconds: 5 } },
      'spec.healthCheck.timeoutSeconds: Invalid value: spec.healthCheck.timeoutSeconds must be less than spec.healthCheck.intervalSeconds',
    ],
    [
      'an interval shorter than the default timeout',
      { ...managed, healthCheck: { intervalSeconds: 4 } },
      'spec.healthCheck.timeoutSeconds: Invalid value: spec.healthCheck.timeoutSeconds must be less than spec.healthCheck.intervalSeconds',
    ],
    [
      'a health-check interval of 1 s',
      { ...managed, healthCheck: { intervalSeconds: 1, timeoutSeconds: 1 } },
      'spec.healthCheck.intervalSeconds in body should be greater than or equal to 2',
    ],
    [
      'a health-check timeout of 0 s',
      { ...managed, healthCheck: { timeoutSeconds: 0 } },
      'spec.healthCheck.timeoutSeconds in body should be greater than or equal to 1',
    ],
    [
      'failureThreshold 0',
      { ...managed, healthCheck: { failureThreshold: 0 } },
      'spec.healthCheck.failureThreshold in body should be greater than or equal to 1',
    ],
    [
      'successThreshold 0',
      { ...managed, healthCheck: { successThreshold: 0 } },
      'spec.healthCheck.successThreshold in body should be greater than or equal to 1',
    ],
    [
      'an ftp probe URL',
      { ...managed, healthCheck: { probeURL: 'ftp://example.com/' } },
      'spec.healthCheck.probeURL must be an absolute http:// or https:// URL',
    ],
    [
      'an ftp exit IP URL',
      { ...managed, healthCheck: { exitIPURL: 'ftp://example.com/' } },
      'spec.healthCheck.exitIPURL must be an absolute http:// or https:// URL',
    ],
    [
      'an exit IP URL port over 65535',
      { ...managed, healthCheck: { exitIPURL: 'http://example.com:65536/' } },
      'spec.healthCheck.exitIPURL port must be 1-65535',
    ],
    [
      'an exit IP URL with a numeric host a parser reads as another address',
      { ...managed, healthCheck: { exitIPURL: 'http://127.1/ip' } },
      'spec.healthCheck.exitIPURL host must be an IP address in canonical form',
    ],
    [
      'a relative probe URL',
      { ...managed, healthCheck: { probeURL: '/generate_204' } },
      'spec.healthCheck.probeURL must be an absolute http:// or https:// URL',
    ],
    [
      'a probe URL port over 65535',
      { ...managed, healthCheck: { probeURL: 'http://example.com:65536/' } },
      'spec.healthCheck.probeURL: Invalid value: "http://example.com:65536/": spec.healthCheck.probeURL port must be 1-65535',
    ],
    [
      'a probe URL port 0',
      { ...managed, healthCheck: { probeURL: 'http://example.com:0/' } },
      'spec.healthCheck.probeURL port must be 1-65535',
    ],
    [
      'a probe URL port with 20 digits',
      { ...managed, healthCheck: { probeURL: 'http://example.com:99999999999999999999/' } },
      'spec.healthCheck.probeURL port must be 1-65535',
    ],
    [
      'a probe URL port with a leading zero',
      { ...managed, healthCheck: { probeURL: 'http://example.com:080/' } },
      'spec.healthCheck.probeURL port must be 1-65535 without leading zeros',
    ],
    [
      'a probe URL with an IPv6 zone id',
      { ...managed, healthCheck: { probeURL: 'http://[fe80::1%25eth0]:8080/' } },
      'spec.healthCheck.probeURL must not carry an IPv6 zone id',
    ],
    [
      'a probe URL whose host has a <',
      { ...managed, healthCheck: { probeURL: 'http://a<b/' } },
      "spec.healthCheck.probeURL host must not contain '<' or '>'",
    ],
    [
      'a probe URL at an octal IPv4 host',
      { ...managed, healthCheck: { probeURL: 'http://0177.0.0.1/generate_204' } },
      'spec.healthCheck.probeURL host must be an IP address in canonical form',
    ],
    [
      'a probe URL at a hex IPv4 host in upper case',
      { ...managed, healthCheck: { probeURL: 'https://0X7F.1/' } },
      'spec.healthCheck.probeURL host must be an IP address in canonical form',
    ],
    [
      'no expected status codes',
      { ...managed, healthCheck: { expectedStatusCodes: [] } },
      'spec.healthCheck.expectedStatusCodes in body should have at least 1 items',
    ],
    [
      'an expected status code below 100',
      { ...managed, healthCheck: { expectedStatusCodes: [99] } },
      'spec.healthCheck.expectedStatusCodes[0] in body should be greater than or equal to 100',
    ],
    [
      'a repeated expected status code',
      { ...managed, healthCheck: { expectedStatusCodes: [200, 200] } },
      'spec.healthCheck.expectedStatusCodes[1]: Duplicate value: 200',
    ],
    [
      'an attribute key with a space',
      { ...managed, attributes: { 'bad key': 'v' } },
      'spec.attributes keys must be 1-63 letters, digits',
    ],
    [
      'an attribute key over 63 characters',
      { ...managed, attributes: { [x(64)]: 'v' } },
      'spec.attributes keys must be 1-63 letters, digits',
    ],
    [
      'an attribute value over 253 characters',
      { ...managed, attributes: { geo: x(254) } },
      'spec.attributes.geo: Too long',
    ],
    [
      'more than 32 attributes',
      { ...managed, attributes: manyAttributes },
      'spec.attributes: Too many: 33: must have at most 32 items',
    ],
  ])('with %s', async (_case, spec, expected) => {
    const message = await rejectionOf(
      proxies.create('invalid', spec === undefined ? {} : { spec }, { dryRun: true }),
    );
    expect(message).toContain(expected);
  });
});

describe('spec.endpoint.host names exactly one address (issue 12 item 1)', () => {
  const externalAt = (host: string) => ({ spec: { mode: 'External', endpoint: { host, port: 3128 } } });

  it.each(BAD_HOSTS)('rejects %s (%s), naming spec.endpoint.host once', async (_what, host) => {
    const message = await rejectionOf(proxies.create('bad-host', externalAt(host), { dryRun: true }));
    expect(message).toContain('spec.endpoint.host');
    expect(message).not.toContain('spec.endpoint.host must be an IPv4 address in dotted decimal, spec.');
    // The operator's own check (crds/endpoint-host.ts) agrees with the API server.
    expect(isProxyHost(host)).toBe(false);
  });

  it.each(GOOD_HOSTS)('accepts %s (%s)', async (_what, host) => {
    const stored = await proxies.create(uniqueName('good-host'), externalAt(host), { dryRun: true });
    expect(stored.spec.endpoint?.host).toBe(host);
    expect(isProxyHost(host)).toBe(true);
  });
});

describe('probe URLs the operator can use are accepted (issue 12 item 2)', () => {
  it.each([
    'https://www.gstatic.com/generate_204',
    'http://10.0.0.1:65535/healthz',
    'http://[2001:db8::1]:1/',
    'http://localhost/',
    'https://a.7f/ok',
    'http://user:pw@example.com:8080/?q=%20',
  ])('%s', async (probeURL) => {
    const stored = await proxies.create(
      uniqueName('probe-url'),
      { spec: { ...managed, healthCheck: { probeURL } } },
      { dryRun: true },
    );
    expect(stored.spec.healthCheck.probeURL).toBe(probeURL);
  });
});

describe('exit IP URLs are optional and stored as given (issue 24 item 5)', () => {
  it('has no default', async () => {
    const stored = await proxies.create(uniqueName('exit-ip'), { spec: managed }, { dryRun: true });
    expect(stored.spec.healthCheck).not.toHaveProperty('exitIPURL');
  });
  it.each(['https://api.ipify.org', 'http://127.0.0.1:8080/ip', 'https://httpbin.org/ip'])(
    '%s',
    async (exitIPURL) => {
      const stored = await proxies.create(
        uniqueName('exit-ip'),
        { spec: { ...managed, healthCheck: { exitIPURL } } },
        { dryRun: true },
      );
      expect(stored.spec.healthCheck.exitIPURL).toBe(exitIPURL);
    },
  );
});

describe('the API server accepts a valid Proxy and stores it with every default applied', () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    [
      'a minimal Managed proxy',
      managed,
      {
        ...managed,
        port: DEFAULTS.port,
        maxLeases: DEFAULTS.maxLeases,
        healthCheck: defaultHealthCheck,
        rotation: {},
      },
    ],
    [
      'a minimal External proxy',
      external,
      {
        ...external,
        port: DEFAULTS.port,
        maxLeases: DEFAULTS.maxLeases,
        healthCheck: defaultHealthCheck,
        rotation: {},
      },
    ],
    [
      'an External proxy with a credentials Secret',
      { ...external, endpoint: { ...external.endpoint, credentialsSecretRef: { name: 'proxy-creds.eu' } } },
      {
        ...external,
        endpoint: { ...external.endpoint, credentialsSecretRef: { name: 'proxy-creds.eu' } },
        port: DEFAULTS.port,
        maxLeases: DEFAULTS.maxLeases,
        healthCheck: defaultHealthCheck,
        rotation: {},
      },
    ],
    [
      'a Managed proxy with every field set and a partial healthCheck',
      {
        ...managed,
        placement: {
          region: 'europe-west1',
          zone: 'europe-west1-b',
          machineType: 'e2-micro',
          image: 'projects/debian-cloud/global/images/family/debian-12',
        },
        cloudInit: { inline: '#cloud-config\npackages: [squid]\n' },
        port: 8080,
        maxLeases: 0,
        attributes: { geo: 'eu', 'asn.number': '15169', purpose: 'crawl news' },
        healthCheck: { intervalSeconds: 60, expectedStatusCodes: [204] },
        rotation: { unhealthyAfterSeconds: 600, maxAgeSeconds: 86400, whenCoolingDownOn: 3 },
      },
      {
        ...managed,
        placement: {
          region: 'europe-west1',
          zone: 'europe-west1-b',
          machineType: 'e2-micro',
          image: 'projects/debian-cloud/global/images/family/debian-12',
        },
        cloudInit: { inline: '#cloud-config\npackages: [squid]\n' },
        port: 8080,
        maxLeases: 0,
        attributes: { geo: 'eu', 'asn.number': '15169', purpose: 'crawl news' },
        healthCheck: { ...defaultHealthCheck, intervalSeconds: 60, expectedStatusCodes: [204] },
        rotation: { unhealthyAfterSeconds: 600, maxAgeSeconds: 86400, whenCoolingDownOn: 3 },
      },
    ],
    [
      'a Managed proxy reading cloud-init from a Secret',
      { ...managed, cloudInit: { secretRef: { name: 'squid.cloud-init', key: 'user-data' } } },
      {
        ...managed,
        cloudInit: { secretRef: { name: 'squid.cloud-init', key: 'user-data' } },
        port: DEFAULTS.port,
        maxLeases: DEFAULTS.maxLeases,
        healthCheck: defaultHealthCheck,
        rotation: {},
      },
    ],
    [
      'an External proxy at an IPv6 address on the highest port',
      {
        mode: 'External',
        endpoint: { host: '2001:db8::10', port: 65535 },
        maxLeases: LIMITS.maxLeasesMaximum,
      },
      {
        mode: 'External',
        endpoint: { host: '2001:db8::10', port: 65535 },
        port: DEFAULTS.port,
        maxLeases: LIMITS.maxLeasesMaximum,
        healthCheck: defaultHealthCheck,
        rotation: {},
      },
    ],
    [
      'an External proxy at an IPv4 address with a plain-http probe and the longest timeout below the interval',
      {
        mode: 'External',
        endpoint: { host: '203.0.113.7', port: 3128 },
        healthCheck: { probeURL: 'http://example.com:8080/ok?x=1', timeoutSeconds: 29 },
      },
      {
        mode: 'External',
        endpoint: { host: '203.0.113.7', port: 3128 },
        port: DEFAULTS.port,
        maxLeases: DEFAULTS.maxLeases,
        healthCheck: {
          ...defaultHealthCheck,
          probeURL: 'http://example.com:8080/ok?x=1',
          timeoutSeconds: 29,
        },
        rotation: {},
      },
    ],
  ])('%s', async (_case, spec, stored) => {
    const name = uniqueName('valid');
    await proxies.create(name, { spec });
    expect((await proxies.get(name)).spec).toEqual(stored);
  });
});
