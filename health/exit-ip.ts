// The proxy's observed egress address: what an echo service (spec.healthCheck.exitIPURL) says
// the caller's address is, read through the proxy. Pure parsing and scheduling; the request
// itself is the prober's.
import { isIP } from 'node:net';

/** Why an exit IP read told nothing; a closed set, so the metric stays countable. */
export const ExitIPFailure = {
  /** The request through the proxy failed (connect, CONNECT, TLS, timeout ...). */
  RequestFailed: 'RequestFailed',
  /** The echo service answered with a status other than 200. */
  UnexpectedStatus: 'UnexpectedStatus',
  /** The answer was neither a bare IP address nor JSON with an `ip` string holding one. */
  NotAnIP: 'NotAnIP',
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
