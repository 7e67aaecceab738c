// The proxy's observed egress address: what an echo service (spec.healthCheck.exitIPURL) says
// the caller's address is, read through the proxy. Pure parsing and scheduling; the request
// itself is the prober's.
import { BlockList, isIP } from 'node:net';

/** Why an exit IP read told nothing; a closed set, so the metric stays countable. */
export const ExitIPFailure = {
  /** The request through the proxy failed (connect, CONNECT, TLS, timeout ...). */
  RequestFailed: 'RequestFailed',
  /** The echo service answered with a status other than 200. */
  UnexpectedStatus: 'UnexpectedStatus',
  /** The answer was neither a bare IP address nor JSON with an `ip` string holding one. */
  NotAnIP: 'NotAnIP',
  /** The answer is not a public address (private, loopback, link-local, shared, reserved ...). */
  NotPublic: 'NotPublic',
  /**
   * The proxy itself could have written the answer: the echo URL is plain http (a proxy answers
   * an absolute-URI request itself) or names the proxy's own address. Not sent.
   */
  Forgeable: 'Forgeable',
} as const;
export type ExitIPFailure = (typeof ExitIPFailure)[keyof typeof ExitIPFailure];

export type ExitIPReading = { ok: true; ip: string } | { ok: false; reason: ExitIPFailure; message: string };

/** Answers longer than this are not an address (and are not read further). */
export const EXIT_IP_BODY_LIMIT = 1024;

/**
 * Canonical text of an IP address, or undefined if `text` is none: IPv6 lower-case and
 * compressed (as the URL parser writes it), an IPv4-mapped IPv6 address as its IPv4 (a
 * dual-stack echo server reports an IPv4 caller so), no zone ids.
 */
export function canonicalIP(text: string): string | undefined {
  const family = isIP(text);
  if (family === 4) return text;
  if (family !== 6 || text.includes('%')) return undefined;
  const compressed = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(compressed);
  if (mapped) {
    const high = parseInt(mapped[1], 16);
    const low = parseInt(mapped[2], 16);
    return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  }
  return compressed;
}

/**
 * Reads an echo service's answer: a bare address (plain text, surrounding whitespace
 * ignored) or a JSON object whose `ip` (or, as httpbin.org/ip writes it, `origin`) is one.
 */
export function parseExitIP(body: string): ExitIPReading {
  const text = body.trim();
  let candidate: unknown = text;
  if (text.startsWith('{')) {
    try {
      const parsed = JSON.parse(text) as unknown;
      candidate =
        typeof parsed === 'object' && parsed !== null
          ? ((parsed as Record<string, unknown>).ip ?? (parsed as Record<string, unknown>).origin)
          : undefined;
    } catch {
      candidate = undefined;
    }
  }
  const ip = typeof candidate === 'string' ? canonicalIP(candidate.trim()) : undefined;
  if (ip !== undefined) return { ok: true, ip };
  const shown = text.length > 64 ? `${text.slice(0, 61)}...` : text;
  return {
    ok: false,
    reason: ExitIPFailure.NotAnIP,
    message: `the exit IP answer is not an IP address nor JSON {"ip": "<address>"}: ${JSON.stringify(shown)}`,
  };
}

/**
 * Whether a successful health probe should be followed by an exit IP read: the first one at
 * an endpoint, then once `refreshMillis` have passed since the last read (failed or not, so
 * a broken echo service costs one request and one warning per refresh, not per probe).
 */
export function exitIPDue(lastReadAt: number | undefined, now: number, refreshMillis: number): boolean {
  return lastReadAt === undefined || now - lastReadAt >= refreshMillis;
}

/**
 * Addresses no echo service on the internet can see a proxy come from (RFC 6890 and friends).
 * The documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) are
 * left out: nothing real answers from them, and examples and tests use them as internet
 * addresses.
 */
const NOT_PUBLIC = (() => {
  const list = new BlockList();
  for (const [net, prefix] of [
    ['0.0.0.0', 8],
    ['10.0.0.0', 8],
    ['100.64.0.0', 10],
    ['127.0.0.0', 8],
    ['169.254.0.0', 16],
    ['172.16.0.0', 12],
    ['192.0.0.0', 24],
    ['192.88.99.0', 24],
    ['192.168.0.0', 16],
    ['198.18.0.0', 15],
    ['224.0.0.0', 4],
    ['240.0.0.0', 4],
  ] as const)
    list.addSubnet(net, prefix, 'ipv4');
  for (const [net, prefix] of [
    ['::', 128],
    ['::1', 128],
    ['64:ff9b:1::', 48],
    ['100::', 64],
    ['fc00::', 7],
    ['fe80::', 10],
    ['ff00::', 8],
  ] as const)
    list.addSubnet(net, prefix, 'ipv6');
  return list;
})();

/** Whether `ip` (canonical, see canonicalIP) is a public unicast address. */
export function isPublicAddress(text: string): boolean {
  // An IPv4-mapped address is judged as its IPv4 (BlockList would match IPv4 ranges for it).
  const ip = canonicalIP(text);
  if (ip === undefined) return false;
  return !NOT_PUBLIC.check(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6');
}

/** What the engine trusts of an echo answer. */
export interface ExitIPPolicy {
  /**
   * Accept answers that are not public addresses and echoes over plain http: loopback tests
   * and private egress only (--exit-ip-allow-non-public).
   */
  allowNonPublic: boolean;
}

/**
 * Why an echo URL cannot tell a proxy's exit IP, before any request: over plain http the proxy
 * answers the request itself, and an echo at the proxy's own address is the proxy. The Proxy's
 * author chooses the URL, so without this a Proxy could claim any exit IP.
 */
export function echoURLProblem(
  exitIPURL: string,
  proxyHost: string,
  policy: ExitIPPolicy,
): Extract<ExitIPReading, { ok: false }> | undefined {
  const url = new URL(exitIPURL);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (canonicalIP(host) !== undefined && canonicalIP(host) === canonicalIP(proxyHost))
    return {
      ok: false,
      reason: ExitIPFailure.Forgeable,
      message: `the exit IP echo ${exitIPURL} is the proxy's own address: the proxy would answer itself`,
    };
  if (url.protocol === 'http:' && !policy.allowNonPublic)
    return {
      ok: false,
      reason: ExitIPFailure.Forgeable,
      message: `the exit IP echo ${exitIPURL} is plain http: the proxy answers such a request itself and could write any address; use https (or --exit-ip-allow-non-public for tests)`,
    };
  return undefined;
}

/** An address read through the proxy, refused unless it is one the internet could see (see ExitIPPolicy). */
export function judgeExitIP(reading: ExitIPReading, policy: ExitIPPolicy): ExitIPReading {
  if (!reading.ok || policy.allowNonPublic || isPublicAddress(reading.ip)) return reading;
  return {
    ok: false,
    reason: ExitIPFailure.NotPublic,
    message: `the exit IP echo answered ${reading.ip}, not a public address: no proxy reaches the internet from it (--exit-ip-allow-non-public accepts it, for tests)`,
  };
}
