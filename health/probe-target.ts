// What the engine needs to know to probe one proxy. Deliberately free of Kubernetes types:
// the caller maps a Proxy resource (or anything else) onto it.

export interface ProbeTarget {
  /** Stable identity, e.g. "namespace/name". */
  key: string;
  /** Proxy address (IP or hostname). */
  host: string;
  port: number;
  /** URL fetched THROUGH the proxy; https goes through a CONNECT tunnel, http as an absolute-URI request. */
  probeURL: string;
  intervalSeconds: number;
  timeoutSeconds: number;
  failureThreshold: number;
  successThreshold: number;
  expectedStatusCodes: number[];
  /**
   * An echo service (http or https) answering with the caller's address: when set, the engine
   * reads it through the proxy after successful probes and reports the proxy's exit IP.
   */
  exitIPURL?: string;
  /**
   * Basic-auth credentials the proxy requires, sent as Proxy-Authorization. Secret: the engine
   * never logs a target.
   */
  credentials?: { username: string; password: string };
  /**
   * What serves at host:port (a provider's instance ID), if known: a new instance at the same
   * address is a new endpoint, so its verdict and exit IP are read afresh, not inherited.
   */
  instance?: string;
  /**
   * Connect only to addresses the engine's `addressGuard` accepts (External endpoints: the
   * literal address, or each address the name resolves to, checked before connecting).
   */
  guarded?: boolean;
}

export class InvalidProbeTargetError extends Error {
  constructor(key: string, problem: string) {
    super(`invalid health probe target ${JSON.stringify(key)}: ${problem}`);
    this.name = 'InvalidProbeTargetError';
  }
}

function positive(value: number): boolean {
  return Number.isFinite(value) && value > 0;
}

function positiveInteger(value: number): boolean {
  return Number.isInteger(value) && value > 0;
}

/** Throws InvalidProbeTargetError naming the first bad field; returns the target unchanged otherwise. */
export function validateProbeTarget(target: ProbeTarget): ProbeTarget {
  const fail = (problem: string): never => {
    throw new InvalidProbeTargetError(target.key, problem);
  };
  if (typeof target.key !== 'string' || target.key === '') fail('key must be a non-empty string');
  if (typeof target.host !== 'string' || target.host.trim() === '') fail('host must be a non-empty string');
  if (!Number.isInteger(target.port) || target.port < 1 || target.port > 65535) {
    fail(`port must be an integer in 1..65535, got ${String(target.port)}`);
  }
  let url: URL | undefined;
  try {
    url = new URL(target.probeURL);
  } catch {
    fail(`probeURL is not a valid URL: ${JSON.stringify(target.probeURL)}`);
  }
  if (url && url.protocol !== 'http:' && url.protocol !== 'https:') {
    fail(`probeURL must be http or https, got ${JSON.stringify(url.protocol)}`);
  }
  if (target.exitIPURL !== undefined) {
    let exit: URL | undefined;
    try {
      exit = new URL(target.exitIPURL);
    } catch {
      fail(`exitIPURL is not a valid URL: ${JSON.stringify(target.exitIPURL)}`);
    }
    if (exit && exit.protocol !== 'http:' && exit.protocol !== 'https:') {
      fail(`exitIPURL must be http or https, got ${JSON.stringify(exit.protocol)}`);
    }
  }
  if (!positive(target.intervalSeconds)) fail(`intervalSeconds must be > 0, got ${target.intervalSeconds}`);
  if (!positive(target.timeoutSeconds)) fail(`timeoutSeconds must be > 0, got ${target.timeoutSeconds}`);
  if (!positiveInteger(target.failureThreshold)) {
    fail(`failureThreshold must be a positive integer, got ${target.failureThreshold}`);
  }
  if (!positiveInteger(target.successThreshold)) {
    fail(`successThreshold must be a positive integer, got ${target.successThreshold}`);
  }
  if (
    !Array.isArray(target.expectedStatusCodes) ||
    target.expectedStatusCodes.length === 0 ||
    !target.expectedStatusCodes.every((c) => Number.isInteger(c) && c >= 100 && c <= 599)
  ) {
    fail(
      `expectedStatusCodes must be a non-empty list of HTTP status codes, got ${JSON.stringify(target.expectedStatusCodes)}`,
    );
  }
  if (target.credentials !== undefined) {
    const { username, password } = target.credentials;
    if (typeof username !== 'string' || username === '' || username.includes(':'))
      fail('credentials.username must be a non-empty string without ":"');
    if (typeof password !== 'string') fail('credentials.password must be a string');
  }
  return target;
}

/** A change of any of these means a different proxy endpoint: counters and verdict start over. */
export function sameEndpoint(a: ProbeTarget, b: ProbeTarget): boolean {
  return (
    a.host === b.host &&
    a.port === b.port &&
    a.probeURL === b.probeURL &&
    a.instance === b.instance &&
    // New credentials (a rotation) are probed at once, not after the old verdict's interval.
    a.credentials?.username === b.credentials?.username &&
    a.credentials?.password === b.credentials?.password
  );
}
