import {
  SQUID_GRACE_SECONDS,
  SQUID_SHUTDOWN_SECONDS,
  squidConfig,
  type SquidConfigInput,
} from '../../../providers/kubernetes/squid-config.js';

/** The http_access rules in order: what Squid decides, first match wins. */
const access = (input: SquidConfigInput) =>
  squidConfig(input)
    .split('\n')
    .filter((l) => l.startsWith('http_access '));

describe('the squid.conf the kubernetes provider ships (what a real Squid makes of it: squid.int)', () => {
  const base: SquidConfigInput = { port: 3128, clients: ['10.0.0.0/8', 'fc00::/7'] };

  it.each<[string, SquidConfigInput, string[]]>([
    [
      'open to the clients only, behind the stock port rules',
      base,
      [
        'http_access deny !Safe_ports',
        'http_access deny CONNECT !SSL_ports',
        'http_access allow clients',
        'http_access deny all',
      ],
    ],
    [
      'denied destinations refused before any client is admitted',
      { ...base, denyDestinations: { domains: ['.internal'], addresses: ['169.254.169.254/32'] } },
      [
        'http_access deny !Safe_ports',
        'http_access deny CONNECT !SSL_ports',
        'http_access deny denied_domains',
        'http_access deny denied_addresses',
        'http_access allow clients',
        'http_access deny all',
      ],
    ],
    [
      'with credentials, a client must also authenticate',
      {
        ...base,
        auth: { helper: ['/usr/lib/squid/basic_ncsa_auth', '/etc/proxy-operator/passwd'], realm: 'proxy' },
      },
      [
        'http_access deny !Safe_ports',
        'http_access deny CONNECT !SSL_ports',
        'http_access deny !clients',
        'http_access deny !authenticated',
        'http_access allow clients',
        'http_access deny all',
      ],
    ],
    [
      'credentials are checked before the destinations, and explicit exceptions punch holes in the refused ranges',
      {
        ...base,
        denyDestinations: { addresses: ['127.0.0.0/8'] },
        allowDestinations: ['127.0.0.1/32'],
        auth: { helper: ['/usr/lib/squid/basic_ncsa_auth', '/p'], realm: 'proxy' },
      },
      [
        'http_access deny !Safe_ports',
        'http_access deny CONNECT !SSL_ports',
        'http_access deny !clients',
        'http_access deny !authenticated',
        'http_access deny denied_addresses !allowed_addresses',
        'http_access allow clients',
        'http_access deny all',
      ],
    ],
    [
      'an exception without refused ranges is no rule at all',
      { ...base, allowDestinations: ['127.0.0.1/32'] },
      [
        'http_access deny !Safe_ports',
        'http_access deny CONNECT !SSL_ports',
        'http_access allow clients',
        'http_access deny all',
      ],
    ],
  ])('%s', (_case, input, rules) => {
    expect(access(input)).toEqual(rules);
  });

  it('listens on the port and names every client range in one acl', () => {
    const conf = squidConfig({ ...base, port: 8080 });
    expect(conf).toContain('\nhttp_port 8080\n');
    expect(conf).toContain('\nacl clients src 10.0.0.0/8 fc00::/7\n');
  });

  it('declares the acls its rules use, and only those', () => {
    const plain = squidConfig(base);
    expect(plain).not.toMatch(/denied_|auth_param|proxy_auth/);
    const closed = squidConfig({
      ...base,
      denyDestinations: { domains: ['.internal'] },
      auth: { helper: ['/usr/lib/squid/basic_ncsa_auth', '/p'], realm: 'crawl' },
    });
    expect(closed).toContain('acl denied_domains dstdomain .internal\n');
    expect(closed).not.toContain('denied_addresses');
    expect(closed).toContain('auth_param basic program /usr/lib/squid/basic_ncsa_auth /p\n');
    expect(closed).toContain('auth_param basic realm crawl\n');
  });

  it('keeps nothing and shuts down inside the Pod grace', () => {
    const conf = squidConfig(base);
    expect(conf).toContain('cache deny all');
    expect(conf).toContain('pid_filename none');
    expect(conf).toContain(`shutdown_lifetime ${SQUID_SHUTDOWN_SECONDS} seconds`);
    expect(SQUID_SHUTDOWN_SECONDS).toBeLessThan(SQUID_GRACE_SECONDS);
  });
});
