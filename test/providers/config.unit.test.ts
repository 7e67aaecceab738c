import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { INTERNAL_DESTINATIONS } from '../../crds/internal-destinations.js';
import { builtinProviderRegistry } from '../../providers/builtin.js';
import { ProvidersConfigError } from '../../providers/config-reader.js';

const registry = builtinProviderRegistry();
const parse = (text: string) => registry.parse(text, 'providers.yaml');
const configs = (text: string) =>
  parse(text).map((e) => ({ name: e.name, type: e.type, config: e.settings.config }));

describe('the providers config file', () => {
  it('reads every provider type with its settings and fills the defaults', () => {
    const text = `
providers:
  - name: mock
    type: mock
  - name: mock-chaos
    type: mock
    mock:
      provisioningSeconds: 0.5
      serveTraffic: true
      ipRange: 10.42.0.0/24
      faults:
        create: { kind: quota, count: 2 }
        get: { kind: transient }
  - name: gcp-eu
    type: gcp
    gcp: { project: my-project }
  - name: gcp-us
    type: gcp
    gcp: { project: p2, network: projects/p2/global/networks/egress, networkTags: [proxy, squid], requestTimeoutSeconds: 10, createTimeoutMinutes: 15 }
  - name: kubernetes
    type: kubernetes
    kubernetes: { namespace: proxy-operator-proxies, image: ubuntu/squid:6.1 }
  - name: aws-us
    type: aws
    aws: { region: us-east-1 }
  - name: aws-eu
    type: aws
    aws:
      region: eu-west-1
      subnetId: subnet-0123456789abcdef0
      securityGroupIds: [sg-0123456789abcdef0]
      instanceType: t3.micro
      imageId: ami-0abcdef1234567890
      addressType: private
      assignPublicIp: false
      endpoint: https://ec2.eu-west-1.amazonaws.com
      requestTimeoutSeconds: 10
`;
    expect(configs(text)).toEqual([
      {
        name: 'mock',
        type: 'mock',
        config: { provisioningSeconds: 5, serveTraffic: false, ipRange: '10.99.0.0/16', faults: {} },
      },
      {
        name: 'mock-chaos',
        type: 'mock',
        config: {
          provisioningSeconds: 0.5,
          serveTraffic: true,
          ipRange: '10.42.0.0/24',
          faults: { create: { kind: 'quota', count: 2 }, get: { kind: 'transient', count: 1 } },
        },
      },
      {
        name: 'gcp-eu',
        type: 'gcp',
        config: {
          project: 'my-project',
          network: 'default',
          networkTags: ['proxy'],
          requestTimeoutSeconds: 30,
          createTimeoutMinutes: 10,
        },
      },
      {
        name: 'gcp-us',
        type: 'gcp',
        config: {
          project: 'p2',
          network: 'projects/p2/global/networks/egress',
          networkTags: ['proxy', 'squid'],
          requestTimeoutSeconds: 10,
          createTimeoutMinutes: 15,
        },
      },
      {
        name: 'kubernetes',
        type: 'kubernetes',
        config: {
          namespace: 'proxy-operator-proxies',
          image: 'ubuntu/squid:6.1',
          clients: [
            '10.0.0.0/8',
            '172.16.0.0/12',
            '192.168.0.0/16',
            '127.0.0.0/8',
            'fc00::/7',
            'fe80::/10',
            '::1/128',
          ],
          startTimeoutSeconds: 300,
          // Closed by default: the internal ranges are refused, nothing is excepted.
          deniedDestinations: [...INTERNAL_DESTINATIONS],
          clusterCIDRs: [],
          allowedDestinations: [],
        },
      },
      {
        name: 'aws-us',
        type: 'aws',
        config: {
          region: 'us-east-1',
          securityGroupIds: [],
          addressType: 'public',
          assignPublicIp: true,
          requestTimeoutSeconds: 30,
        },
      },
      {
        name: 'aws-eu',
        type: 'aws',
        config: {
          region: 'eu-west-1',
          subnetId: 'subnet-0123456789abcdef0',
          securityGroupIds: ['sg-0123456789abcdef0'],
          instanceType: 't3.micro',
          imageId: 'ami-0abcdef1234567890',
          addressType: 'private',
          assignPublicIp: false,
          endpoint: 'https://ec2.eu-west-1.amazonaws.com',
          requestTimeoutSeconds: 10,
        },
      },
    ]);
  });

  it('accepts an empty provider list (an operator tracking only External proxies)', () => {
    expect(parse('providers: []')).toEqual([]);
  });

  const entry = (body: string) => `providers:\n  - name: mock\n    type: mock\n${body}`;

  it.each([
    ['an empty file', '', 'providers.yaml: must be a mapping with a "providers" list'],
    ['a list at the top', '- name: x', 'providers.yaml: must be a mapping with a "providers" list'],
    ['broken YAML', 'providers: [', 'providers.yaml: invalid YAML:'],
    ['no providers key', 'other: 1', 'providers.yaml: providers: required list of provider entries'],
    ['providers not a list', 'providers: {}', 'providers.yaml: providers: required list of provider entries'],
    [
      'an unknown top-level key',
      'providers: []\nextra: 1',
      'providers.yaml: extra: unknown key (allowed: plugins, providers, external)',
    ],
    [
      'an External endpoint range that does not exist',
      'providers: []\nexternal: { allowEndpointRanges: [loopback, private] }',
      'providers.yaml: external.allowEndpointRanges[1]: must be one of loopback, link-local, metadata, unspecified, cluster, got "private"',
    ],
    [
      'allowEndpointRanges that are not a list',
      'providers: []\nexternal: { allowEndpointRanges: loopback }',
      'providers.yaml: external.allowEndpointRanges: must be a list of strings, got "loopback"',
    ],
    [
      'a cluster CIDR that is not one',
      'providers: []\nexternal: { clusterCIDRs: [10.96.0.0/12, 10.244.0.0/33] }',
      'providers.yaml: external.clusterCIDRs[1]: "10.244.0.0/33" is not an address or CIDR range',
    ],
    [
      'an allowed CIDR that is not one',
      'providers: []\nexternal: { allowEndpointCIDRs: [localhost] }',
      'providers.yaml: external.allowEndpointCIDRs[0]: "localhost" is not an address or CIDR range',
    ],
    [
      'an unknown key of external',
      'providers: []\nexternal: { allowRanges: [loopback] }',
      'providers.yaml: external.allowRanges: unknown key (allowed: allowEndpointCIDRs, allowEndpointRanges, clusterCIDRs)',
    ],
    [
      'external that is not a mapping',
      'providers: []\nexternal: [loopback]',
      'providers.yaml: external: must be a mapping, got a list',
    ],
    [
      'plugins that are not a list',
      'plugins: ./p.js\nproviders: []',
      'providers.yaml: plugins: must be a list of strings, got "./p.js"',
    ],
    [
      'an empty plugin',
      'plugins: ["./p.js", ""]\nproviders: []',
      'providers.yaml: plugins[1]: must be a non-empty string, got ""',
    ],
    [
      'an entry that is not a mapping',
      'providers: [mock]',
      'providers.yaml: providers[0]: must be a mapping with name and type',
    ],
    ['a missing name', 'providers:\n  - type: mock', 'providers.yaml: providers[0]: name: required string'],
    [
      'a name of the wrong type',
      'providers:\n  - name: 7\n    type: mock',
      'providers.yaml: providers[0]: name: must be a non-empty string, got 7',
    ],
    [
      'a name that is not DNS-label shaped',
      'providers:\n  - name: GCP_EU\n    type: gcp',
      'providers.yaml: providers[0] (GCP_EU): name: "GCP_EU" must be lowercase',
    ],
    ['a missing type', 'providers:\n  - name: x', 'providers.yaml: providers[0] (x): type: required string'],
    [
      'an unknown type',
      'providers:\n  - name: hetzner-1\n    type: hetzner',
      'providers.yaml: providers[0] (hetzner-1): type: unknown type "hetzner" (known: aws, gcp, kubernetes, mock; a plugin\'s type needs its module under plugins:)',
    ],
    [
      'a duplicate name',
      'providers:\n  - name: a\n    type: mock\n  - name: a\n    type: mock',
      'providers.yaml: providers[1] (a): name: duplicate name "a" (also providers[0])',
    ],
    [
      "another type's block",
      'providers:\n  - name: m\n    type: mock\n    gcp: { project: x }',
      'providers.yaml: providers[0] (m): gcp: unknown key (allowed: mock, name, type)',
    ],
    [
      'a gcp entry without a project',
      'providers:\n  - name: mock\n    type: mock\n  - name: gcp-eu\n    type: gcp',
      'providers.yaml: providers[1] (gcp-eu): gcp.project: required string',
    ],
    [
      'a gcp project of the wrong type',
      'providers:\n  - name: gcp-eu\n    type: gcp\n    gcp: { project: [a] }',
      'providers.yaml: providers[0] (gcp-eu): gcp.project: must be a non-empty string, got a list',
    ],
    [
      'a misspelt gcp key',
      'providers:\n  - name: gcp-eu\n    type: gcp\n    gcp: { project: p, netwrok: default }',
      'providers.yaml: providers[0] (gcp-eu): gcp.netwrok: unknown key (allowed: createTimeoutMinutes, network, networkTags, project, requestTimeoutSeconds)',
    ],
    [
      'a gcp timeout of zero',
      'providers:\n  - name: g\n    type: gcp\n    gcp: { project: p, requestTimeoutSeconds: 0 }',
      'providers.yaml: providers[0] (g): gcp.requestTimeoutSeconds: must be a number from 1 to 600, got 0',
    ],
    [
      'a bad network tag',
      'providers:\n  - name: g\n    type: gcp\n    gcp: { project: p, networkTags: [ok, Not_OK] }',
      'providers.yaml: providers[0] (g): gcp.networkTags[1]: "Not_OK" is not a valid network tag (RFC 1035)',
    ],
    [
      'a gcp block that is a list',
      'providers:\n  - name: g\n    type: gcp\n    gcp: [p]',
      'providers.yaml: providers[0] (g): gcp: must be a mapping, got a list',
    ],
    [
      'negative provisioning time',
      entry('    mock: { provisioningSeconds: -1 }'),
      'providers.yaml: providers[0] (mock): mock.provisioningSeconds: must be a number >= 0, got -1',
    ],
    [
      'serveTraffic as a string',
      entry('    mock: { serveTraffic: "yes" }'),
      'providers.yaml: providers[0] (mock): mock.serveTraffic: must be true or false, got "yes"',
    ],
    [
      'a bad ipRange',
      entry('    mock: { ipRange: 10.0.0.0 }'),
      'providers.yaml: providers[0] (mock): mock.ipRange: "10.0.0.0" must be an IPv4 CIDR',
    ],
    [
      'an unknown fault kind',
      entry('    mock: { faults: { create: { kind: boom } } }'),
      'providers.yaml: providers[0] (mock): mock.faults.create.kind: must be one of quota, transient, permanent, hang, got "boom"',
    ],
    [
      'a fault count of zero',
      entry('    mock: { faults: { get: { kind: quota, count: 0 } } }'),
      'providers.yaml: providers[0] (mock): mock.faults.get.count: must be an integer >= 1, got 0',
    ],
    [
      'a fault for an unknown operation',
      entry('    mock: { faults: { update: { kind: quota } } }'),
      'providers.yaml: providers[0] (mock): mock.faults.update: unknown key (allowed: create, delete, get, listByTag)',
    ],
    [
      'an aws block without a region',
      'providers:\n  - name: a\n    type: aws\n    aws: {}',
      'providers.yaml: providers[0] (a): aws.region: required string',
    ],
    [
      'a region that is not one',
      'providers:\n  - name: a\n    type: aws\n    aws: { region: Europe }',
      'providers.yaml: providers[0] (a): aws.region: "Europe" is not an AWS region name (e.g. us-east-1)',
    ],
    [
      'a subnet that is not one',
      'providers:\n  - name: a\n    type: aws\n    aws: { region: us-east-1, subnetId: my-subnet }',
      'providers.yaml: providers[0] (a): aws.subnetId: "my-subnet" is not a subnet ID (subnet-…)',
    ],
    [
      'a security group name instead of its ID',
      'providers:\n  - name: a\n    type: aws\n    aws: { region: us-east-1, securityGroupIds: [sg-0123456789abcdef0, proxies] }',
      'providers.yaml: providers[0] (a): aws.securityGroupIds[1]: "proxies" is not a security group ID (sg-…)',
    ],
    [
      'an unknown address type',
      'providers:\n  - name: a\n    type: aws\n    aws: { region: us-east-1, addressType: elastic }',
      'providers.yaml: providers[0] (a): aws.addressType: must be one of public, private, got "elastic"',
    ],
    [
      'an endpoint that is not a URL',
      'providers:\n  - name: a\n    type: aws\n    aws: { region: us-east-1, endpoint: localhost:5000 }',
      'providers.yaml: providers[0] (a): aws.endpoint: "localhost:5000" must be an http(s) URL',
    ],
    [
      'credentials in the block (they come from the standard AWS chain)',
      'providers:\n  - name: a\n    type: aws\n    aws: { region: us-east-1, accessKeyId: AKIA }',
      'providers.yaml: providers[0] (a): aws.accessKeyId: unknown key (allowed: addressType, assignPublicIp, endpoint, imageId, instanceType, region, requestTimeoutSeconds, securityGroupIds, subnetId)',
    ],
    [
      'a bad namespace',
      'providers:\n  - name: k\n    type: kubernetes\n    kubernetes: { namespace: Proxies }',
      'providers.yaml: providers[0] (k): kubernetes.namespace: "Proxies" is not a valid namespace name',
    ],
    [
      'a Squid client range that is not a CIDR',
      'providers:\n  - name: k\n    type: kubernetes\n    kubernetes: { clients: [10.0.0.0/8, 10.1.0.0/33] }',
      'providers.yaml: providers[0] (k): kubernetes.clients[1]: "10.1.0.0/33" is not an address or CIDR range',
    ],
    [
      'an allowed destination that is not a CIDR',
      'providers:\n  - name: k\n    type: kubernetes\n    kubernetes: { allowedDestinations: [127.0.0.1/32, inside] }',
      'providers.yaml: providers[0] (k): kubernetes.allowedDestinations[1]: "inside" is not an address or CIDR range',
    ],
    [
      'a cluster CIDR that is not a CIDR',
      'providers:\n  - name: k\n    type: kubernetes\n    kubernetes: { clusterCIDRs: [10.96.0.0/99] }',
      'providers.yaml: providers[0] (k): kubernetes.clusterCIDRs[0]: "10.96.0.0/99" is not an address or CIDR range',
    ],
    [
      'an empty Squid client list (nobody could use the proxies)',
      'providers:\n  - name: k\n    type: kubernetes\n    kubernetes: { clients: [] }',
      'providers.yaml: providers[0] (k): kubernetes.clients: must list at least one source range',
    ],
    [
      'a start bound too short for any Pod to start',
      'providers:\n  - name: k\n    type: kubernetes\n    kubernetes: { startTimeoutSeconds: 2 }',
      'providers.yaml: providers[0] (k): kubernetes.startTimeoutSeconds: must be an integer >= 10, got 2',
    ],
  ])('rejects %s, naming file, entry and key', (_case, text, message) => {
    let thrown: unknown;
    try {
      parse(text);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ProvidersConfigError);
    // Compares the message's start, so a failure shows the whole actual message.
    expect((thrown as Error).message.slice(0, message.length)).toBe(message);
  });

  describe('the external: block (where External endpoints may be, issue 44 item 5)', () => {
    const external = (text: string) => registry.parseConfig(text, 'providers.yaml').external;

    it('refuses every range when absent', () => {
      expect(external('providers: []')).toEqual({ allowRanges: [], allowCIDRs: [], clusterCIDRs: [] });
    });

    it('reads the ranges allowed, the exceptions and the cluster CIDRs', () => {
      expect(
        external(
          'providers: []\nexternal:\n  allowEndpointRanges: [loopback, metadata]\n' +
            '  allowEndpointCIDRs: [10.96.0.7, fd00::/8]\n  clusterCIDRs: [10.96.0.0/12, 10.244.0.0/16]\n',
        ),
      ).toEqual({
        allowRanges: ['loopback', 'metadata'],
        allowCIDRs: ['10.96.0.7', 'fd00::/8'],
        clusterCIDRs: ['10.96.0.0/12', '10.244.0.0/16'],
      });
    });

    it('is read from a file with its entries', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'providers-config-'));
      try {
        const path = join(dir, 'providers.yaml');
        await writeFile(
          path,
          'providers:\n  - name: mock\n    type: mock\nexternal: { allowEndpointRanges: [loopback] }\n',
        );
        const config = await registry.loadConfig(path);
        expect(config.entries.map((e) => e.name)).toEqual(['mock']);
        expect(config.external.allowRanges).toEqual(['loopback']);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  describe('loaded from disk', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'providers-config-'));
    });
    afterAll(() => rm(dir, { recursive: true, force: true }));

    it('names the file by its path in errors', async () => {
      const path = join(dir, 'bad.yaml');
      await writeFile(path, 'providers:\n  - name: x\n    type: nope\n');
      await expect(registry.load(path)).rejects.toThrow(
        `${path}: providers[0] (x): type: unknown type "nope"`,
      );
    });

    it('reports a missing file as a config error', async () => {
      await expect(registry.load(join(dir, 'missing.yaml'))).rejects.toThrow(ProvidersConfigError);
    });

    it('parses a good file', async () => {
      const path = join(dir, 'good.yaml');
      await writeFile(path, 'providers:\n  - name: mock\n    type: mock\n');
      expect((await registry.load(path)).map((e) => e.name)).toEqual(['mock']);
    });
  });
});
