// Where an External endpoint may be (issue 44 item 5): the classifier as a table, one row per
// rule. The health runner refuses a literal address (or a name of these ranges) before it
// probes, and every address a name resolves to before it connects.
import {
  addressOf,
  DEFAULT_EXTERNAL_ENDPOINTS,
  endpointCheck,
  parseCidr,
  type EndpointRange,
  type ExternalEndpointSettings,
} from '../../providers/endpoint-ranges.js';

const settings = (s: Partial<ExternalEndpointSettings> = {}): ExternalEndpointSettings => ({
  ...DEFAULT_EXTERNAL_ENDPOINTS,
  ...s,
});

describe('the default refuses every range, naming it', () => {
  const check = endpointCheck(DEFAULT_EXTERNAL_ENDPOINTS);
  const rows: Array<[string, string, EndpointRange | undefined, string?]> = [
    // loopback
    ['IPv4 loopback', '127.0.0.1', 'loopback', '127.0.0.0/8'],
    ['anywhere in 127/8', '127.255.3.4', 'loopback', '127.0.0.0/8'],
    ['IPv6 loopback', '::1', 'loopback', '::1/128'],
    ['IPv4-mapped loopback (the kernel connects it to 127.0.0.1)', '::ffff:127.0.0.1', 'loopback'],
    ['IPv4-mapped loopback, hex groups', '::ffff:7f00:1', 'loopback'],
    ['the name localhost', 'localhost', 'loopback', 'localhost'],
    ['a *.localhost name (RFC 6761)', 'api.localhost', 'loopback', 'localhost'],
    ['localhost, upper case and a trailing dot', 'LOCALHOST.', 'loopback'],
    // metadata before link-local: the message names what a reader recognises
    ['the metadata address of AWS, GCP, Azure, ...', '169.254.169.254', 'metadata', '169.254.169.254/32'],
    ['AWS ECS task metadata', '169.254.170.2', 'metadata'],
    ['the EKS Pod Identity agent', '169.254.170.23', 'metadata'],
    ['Alibaba Cloud metadata', '100.100.100.200', 'metadata'],
    ['Oracle Cloud (older) metadata', '192.0.0.192', 'metadata'],
    ['AWS IMDS over IPv6', 'fd00:ec2::254', 'metadata', 'fd00:ec2::254/128'],
    ['GCP metadata by name', 'metadata.google.internal', 'metadata'],
    ['the short name metadata', 'metadata', 'metadata'],
    ['AWS instance-data', 'instance-data.ec2.internal', 'metadata'],
    // link-local
    ['IPv4 link-local', '169.254.1.1', 'link-local', '169.254.0.0/16'],
    ['IPv6 link-local', 'fe80::1', 'link-local', 'fe80::/10'],
    ['IPv6 link-local with a zone', 'fe80::1%eth0', 'link-local'],
    ['the end of fe80::/10', 'febf:ffff::1', 'link-local'],
    // unspecified (Linux connects 0.0.0.0 to the local host)
    ['0.0.0.0', '0.0.0.0', 'unspecified', '0.0.0.0/8'],
    ['0/8', '0.1.2.3', 'unspecified'],
    ['::', '::', 'unspecified', '::/128'],
    // allowed
    ['a public IPv4 address', '203.0.113.7', undefined],
    ['a private address outside the cluster (a proxy in the VPC)', '10.1.2.3', undefined],
    ['just past 127/8', '128.0.0.1', undefined],
    ['just past link-local', '169.255.0.1', undefined],
    ['fec0::1 (past fe80::/10)', 'fec0::1', undefined],
    ['a public IPv6 address', '2001:db8::7', undefined],
    ['IPv4-compatible ::7f00:1 is not loopback (not routed)', '::7f00:1', undefined],
    ['a public name: its addresses are checked when it is resolved', 'proxy.example.com', undefined],
    ['a name that merely contains localhost', 'localhost.example.com', undefined],
  ];
  // Every row four cells ('' = the matched CIDR is not checked): jest passes `done` for a missing one.
  it.each(rows.map(([what, host, range, matched]) => [what, host, range, matched ?? '']))(
    '%s: %s',
    (what, host, range, matched) => {
      const refusal = check(host);
      expect(refusal?.range).toBe(range);
      if (matched !== '') expect(refusal?.matched).toBe(matched);
      if (range !== undefined) {
        expect(refusal?.message).toContain(host);
        expect(refusal?.message).toContain(`the ${range}`);
        expect(refusal?.message).toContain(`external.allowEndpointRanges: [${range}]`);
      }
    },
  );
});

describe('the cluster range is the configured CIDRs', () => {
  const check = endpointCheck(settings({ clusterCIDRs: ['10.96.0.0/12', '10.244.0.0/16', 'fd00:10::/64'] }));
  it.each<[string, EndpointRange | undefined]>([
    ['10.96.0.1', 'cluster'],
    ['10.111.255.254', 'cluster'],
    ['10.112.0.1', undefined],
    ['10.244.7.9', 'cluster'],
    ['10.245.0.1', undefined],
    ['fd00:10::5', 'cluster'],
    ['fd00:11::5', undefined],
    ['::ffff:10.96.0.10', 'cluster'],
  ])('%s: %s', (host, range) => {
    expect(check(host)?.range).toBe(range);
  });

  it('is empty by default: a private address is allowed until the SRE lists the cluster’s CIDRs', () => {
    expect(endpointCheck(DEFAULT_EXTERNAL_ENDPOINTS)('10.96.0.1')).toBeUndefined();
  });
});

describe('allowEndpointRanges and allowEndpointCIDRs', () => {
  it.each<[string, Partial<ExternalEndpointSettings>, string, EndpointRange | undefined]>([
    ['loopback allowed: 127.0.0.1', { allowRanges: ['loopback'] }, '127.0.0.1', undefined],
    ['loopback allowed: localhost', { allowRanges: ['loopback'] }, 'localhost', undefined],
    ['loopback allowed: ::1', { allowRanges: ['loopback'] }, '::1', undefined],
    [
      'loopback allowed: metadata still refused',
      { allowRanges: ['loopback'] },
      '169.254.169.254',
      'metadata',
    ],
    [
      'metadata is also link-local: both must be allowed',
      { allowRanges: ['metadata'] },
      '169.254.169.254',
      'link-local',
    ],
    [
      'link-local alone does not allow metadata',
      { allowRanges: ['link-local'] },
      '169.254.169.254',
      'metadata',
    ],
    ['metadata and link-local', { allowRanges: ['metadata', 'link-local'] }, '169.254.169.254', undefined],
    ['metadata names', { allowRanges: ['metadata'] }, 'metadata.google.internal', undefined],
    [
      'loopback allowed but the address in a cluster CIDR',
      { allowRanges: ['loopback'], clusterCIDRs: ['127.0.0.0/8'] },
      '127.0.0.1',
      'cluster',
    ],
    [
      'an exception CIDR allows one address whatever its range',
      { allowCIDRs: ['127.0.0.9/32'] },
      '127.0.0.9',
      undefined,
    ],
    ['... and no other', { allowCIDRs: ['127.0.0.9/32'] }, '127.0.0.10', 'loopback'],
    [
      'a bare address is a one-address exception',
      { allowCIDRs: ['10.96.0.7'], clusterCIDRs: ['10.96.0.0/12'] },
      '10.96.0.7',
      undefined,
    ],
    ['an exception does not allow a name', { allowCIDRs: ['127.0.0.0/8'] }, 'localhost', 'loopback'],
  ])('%s', (_what, s, host, range) => {
    expect(endpointCheck(settings(s))(host)?.range).toBe(range);
  });
});

describe('addresses and CIDRs', () => {
  it.each<[string, { family: 4 | 6; value: bigint } | undefined]>([
    ['127.0.0.1', { family: 4, value: 0x7f000001n }],
    ['::ffff:127.0.0.1', { family: 4, value: 0x7f000001n }],
    ['::1', { family: 6, value: 1n }],
    ['fe80::1%eth0', { family: 6, value: (0xfe80n << 112n) | 1n }],
    ['1:2:3:4:5:6:1.2.3.4', { family: 6, value: 0x0001000200030004000500060102_0304n }],
    ['localhost', undefined],
    ['127.1', undefined],
  ])('addressOf(%s)', (text, expected) => {
    expect(addressOf(text)).toEqual(expected);
  });

  it.each<[string, boolean]>([
    ['10.0.0.0/8', true],
    ['10.0.0.1', true],
    ['::/0', true],
    ['fd00::/129', false],
    ['10.0.0.0/33', false],
    ['10.0.0.0/8/8', false],
    ['10.0.0.0/x', false],
    ['10.0.0/8', false],
    ['fe80::1%eth0/64', false],
    ['', false],
  ])('parseCidr(%s) accepts: %s', (text, ok) => {
    expect(parseCidr(text) !== undefined).toBe(ok);
  });
});
