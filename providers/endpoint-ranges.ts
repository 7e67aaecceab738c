// Where an External proxy's endpoint may be (issue 44 item 5). The operator probes every
// endpoint from its own position, inside the cluster and beside the node: an endpoint in
// loopback, link-local, the cloud metadata addresses or the cluster's own CIDRs would make it
// connect to the API server, Redis or the metadata service and report what answered (a port
// scan by Proxy). Such endpoints are refused unless the providers config's `external:` block
// allows them. Pure: addresses in, a refusal (naming the range) out; the health runner checks
// a literal address before probing and every address a name resolves to before connecting.
import { isIP } from 'node:net';

/** The ranges an External endpoint is refused in by default; `cluster` is configured. */
export const ENDPOINT_RANGES = ['loopback', 'link-local', 'metadata', 'unspecified', 'cluster'] as const;
export type EndpointRange = (typeof ENDPOINT_RANGES)[number];

/**
 * The fixed ranges. `metadata` lists the instance metadata services of the clouds we know
 * (AWS, GCP, Azure, OpenStack, DigitalOcean and Oracle at 169.254.169.254; AWS ECS task
 * metadata 169.254.170.2 and the EKS Pod Identity agent 169.254.170.23, and their IPv6
 * fd00:ec2::254 and fd00:ec2::23; Alibaba 100.100.100.200; Oracle's older 192.0.0.192).
 * `unspecified` is 0.0.0.0/8 and ::, which Linux connects to the local host.
 */
export const RANGE_CIDRS: Readonly<Record<Exclude<EndpointRange, 'cluster'>, readonly string[]>> = {
  metadata: [
    '169.254.169.254/32',
    '169.254.170.2/32',
    '169.254.170.23/32',
    '100.100.100.200/32',
    '192.0.0.192/32',
    'fd00:ec2::254/128',
    'fd00:ec2::23/128',
  ],
  loopback: ['127.0.0.0/8', '::1/128'],
  'link-local': ['169.254.0.0/16', 'fe80::/10'],
  unspecified: ['0.0.0.0/8', '::/128'],
};

/** Names that mean these ranges whatever DNS says (`*.localhost` too, RFC 6761). */
export const RANGE_NAMES: Readonly<Record<'loopback' | 'metadata', readonly string[]>> = {
  loopback: ['localhost'],
  metadata: [
    'metadata',
    'metadata.google.internal',
    'metadata.goog',
    'instance-data',
    'instance-data.ec2.internal',
  ],
};

/** The providers config's `external:` block. */
export interface ExternalEndpointSettings {
  /** `allowEndpointRanges`: ranges whose endpoints are probed and leased after all. */
  allowRanges: readonly EndpointRange[];
  /** `allowEndpointCIDRs`: exceptions, allowed whatever range they lie in. */
  allowCIDRs: readonly string[];
  /** `clusterCIDRs` (plus what the operator learns itself, e.g. the API server's addresses). */
  clusterCIDRs: readonly string[];
}

/** The default refuses every range. */
export const DEFAULT_EXTERNAL_ENDPOINTS: ExternalEndpointSettings = {
  allowRanges: [],
  allowCIDRs: [],
  clusterCIDRs: [],
};

export interface EndpointRefusal {
  range: EndpointRange;
  /** The range's CIDR the address lies in, or the name it matched. */
  matched: string;
  /** Names the range and the setting that allows it; never a credential. */
  message: string;
}

/** Refusal of a host (an address or a name, by the name alone) or of a resolved address. */
export type EndpointCheck = (host: string) => EndpointRefusal | undefined;

interface Cidr {
  text: string;
  family: 4 | 6;
  network: bigint;
  prefix: number;
}

/** An IPv4 address as 32 bits. */
function ipv4Value(ip: string): bigint {
  return ip.split('.').reduce((acc, octet) => (acc << 8n) | BigInt(Number(octet)), 0n);
}

/** An IPv6 address (no zone) as 128 bits; an embedded IPv4 tail counts as two groups. */
function ipv6Value(ip: string): bigint {
  const groups = (part: string): bigint[] =>
    part === ''
      ? []
      : part.split(':').flatMap((g) => {
          if (!g.includes('.')) return [BigInt(parseInt(g, 16))];
          const v4 = ipv4Value(g);
          return [v4 >> 16n, v4 & 0xffffn];
        });
  const [head, tail] = ip.split('::');
  const h = groups(head);
  const t = tail === undefined ? [] : groups(tail);
  const all = tail === undefined ? h : [...h, ...Array<bigint>(8 - h.length - t.length).fill(0n), ...t];
  return all.reduce((acc, g) => (acc << 16n) | g, 0n);
}

/**
 * An address's family and bits, or undefined if `text` is none. An IPv4-mapped IPv6 address
 * (::ffff:127.0.0.1, which DNS may answer and which the kernel connects to 127.0.0.1) is its
 * IPv4; a zone id is dropped.
 */
export function addressOf(text: string): { family: 4 | 6; value: bigint } | undefined {
  const ip = text.replace(/%.*$/, '');
  const family = isIP(ip);
  if (family === 4) return { family: 4, value: ipv4Value(ip) };
  if (family !== 6) return undefined;
  const value = ipv6Value(ip);
  if (value >> 32n === 0xffffn) return { family: 4, value: value & 0xffffffffn };
  return { family: 6, value };
}

/** `a.b.c.d/n`, `x::/n`, or a bare address (a single-address range), or undefined. */
export function parseCidr(text: string): Cidr | undefined {
  const [address, prefixText, extra] = text.split('/');
  if (extra !== undefined || address === undefined || address.includes('%')) return undefined;
  const family = isIP(address);
  if (family !== 4 && family !== 6) return undefined;
  const bits = family === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (prefix > bits) return undefined;
  const value = family === 4 ? ipv4Value(address) : ipv6Value(address);
  const mask = prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(bits - prefix);
  return { text, family, network: value & mask, prefix };
}

function contains(cidr: Cidr, address: { family: 4 | 6; value: bigint }): boolean {
  if (cidr.family !== address.family) return false;
  const bits = cidr.family === 4 ? 32 : 128;
  const shift = BigInt(bits - cidr.prefix);
  return address.value >> shift === cidr.network >> shift;
}

function cidrs(list: readonly string[]): Cidr[] {
  return list.map((text) => {
    const cidr = parseCidr(text);
    if (!cidr) throw new Error(`"${text}" is not an address or CIDR range`);
    return cidr;
  });
}

const ALLOW_HINT = 'External endpoints there are refused unless the providers config allows them';

function refusal(
  host: string,
  range: EndpointRange,
  matched: string,
  how: 'name' | 'address',
): EndpointRefusal {
  const what =
    how === 'name'
      ? `${host} is a name of the ${range} range`
      : `${host} is in the ${range} range (${matched})`;
  return {
    range,
    matched,
    message: `${what}; ${ALLOW_HINT} (external.allowEndpointRanges: [${range}], or the address in external.allowEndpointCIDRs)`,
  };
}

/**
 * The check for these settings, built once. An address is refused when it lies in a range the
 * settings do not allow (an address in several, as 169.254.169.254 is metadata and link-local,
 * needs each allowed) and in none of `allowCIDRs`; a name when it is one of RANGE_NAMES (or
 * ends in `.localhost`) of a range not allowed. Other names pass here: what they resolve to is
 * checked before each connection.
 */
export function endpointCheck(settings: ExternalEndpointSettings): EndpointCheck {
  const allowed = new Set<EndpointRange>(settings.allowRanges);
  const exceptions = cidrs(settings.allowCIDRs);
  // Most specific first: the message names the range a reader recognises.
  const ranges: Array<[EndpointRange, Cidr[]]> = [
    ['metadata', cidrs(RANGE_CIDRS.metadata)],
    ['loopback', cidrs(RANGE_CIDRS.loopback)],
    ['link-local', cidrs(RANGE_CIDRS['link-local'])],
    ['unspecified', cidrs(RANGE_CIDRS.unspecified)],
    ['cluster', cidrs(settings.clusterCIDRs)],
  ];
  const refused = ranges.filter(([range]) => !allowed.has(range));
  return (host) => {
    const address = addressOf(host);
    if (address === undefined) {
      const name = host.toLowerCase().replace(/\.$/, '');
      if (!allowed.has('loopback') && (RANGE_NAMES.loopback.includes(name) || name.endsWith('.localhost')))
        return refusal(host, 'loopback', 'localhost', 'name');
      if (!allowed.has('metadata') && RANGE_NAMES.metadata.includes(name))
        return refusal(host, 'metadata', name, 'name');
      return undefined;
    }
    if (exceptions.some((c) => contains(c, address))) return undefined;
    for (const [range, list] of refused) {
      const hit = list.find((c) => contains(c, address));
      if (hit) return refusal(host, range, hit.text, 'address');
    }
    return undefined;
  };
}
