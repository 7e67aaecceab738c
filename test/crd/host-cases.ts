// Issue 12 item 1: one table of proxy hosts for the pure check (crds/endpoint-host.ts) and for the
// CRD's CEL rule on the real API server, so the operator and the API server agree host by host.

/** [what it is, the host]: a host that names exactly one address. */
export const GOOD_HOSTS: ReadonlyArray<readonly [string, string]> = [
  ['canonical IPv4', '203.0.113.7'],
  ['IPv4 with zero octets', '10.0.0.0'],
  ['the highest IPv4', '255.255.255.255'],
  ['IPv6', '2001:db8::10'],
  ['IPv6 loopback', '::1'],
  ['IPv6 unspecified', '::'],
  ['IPv6 in full with leading zeros in groups', '2001:0db8:0000:0000:0000:0000:0000:0010'],
  ['IPv6 in upper case', '2001:DB8::A'],
  ['IPv6 with an embedded IPv4 tail', '64:ff9b::192.0.2.33'],
  ['a DNS name', 'proxy.example.net'],
  ['a single-label name', 'squid'],
  ['a name with digits in a label', 'proxy-1.eu-west1.example.com'],
  ['a name whose last label starts with a digit but is not a number', 'a.1x'],
  ['a name whose last label is hex without 0x', 'a.7f'],
  ['a name with numeric labels before a name', '10.0.0.example'],
  ['a 63-character label', `${'a'.repeat(63)}.example`],
];

/** [what it is, the host]: a host a URL parser reads as another address, or no address. */
export const BAD_HOSTS: ReadonlyArray<readonly [string, string]> = [
  ['a zero-padded octet', '10.0.0.010'],
  ['an octal first octet', '0177.0.0.1'],
  ['a hex first octet', '0x7f.0.0.1'],
  ['a hex number as one label', '0x7f000001'],
  ['a bare integer', '2130706433'],
  ['a short form', '127.1'],
  ['an out-of-range octet', '256.1.1.1'],
  ['five numeric labels', '1.2.3.4.5'],
  ['a name ending in a numeric label', 'proxy.example.1'],
  ['a name ending in 0x', 'proxy.0x'],
  ['a 64-character label', `${'a'.repeat(64)}.example`],
  ['an upper-case name', 'Proxy.example.net'],
  ['a trailing dot', 'proxy.example.net.'],
  ['an empty label', 'proxy..example'],
  ['an underscore', 'my_proxy.example'],
  ['a bracketed IPv6 address', '[2001:db8::10]'],
  ['an IPv6 zone id', 'fe80::1%eth0'],
  ['an IPv4-mapped IPv6 address', '::ffff:127.0.0.1'],
  ['an IPv4-mapped IPv6 address in hex', '::ffff:7f00:1'],
  ['IPv6 with a zero-padded IPv4 tail', '64:ff9b::192.0.2.033'],
  ['IPv6 with two ::', '2001::db8::1'],
  ['IPv6 with a 5-digit group', '2001:db8::10000'],
  ['IPv6 with nine groups', '1:2:3:4:5:6:7:8:9'],
  ['a host and port', 'proxy.example.net:3128'],
  ['a space', 'bad host'],
];
