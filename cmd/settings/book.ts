// The lease book's flags: its rules (cooldowns, suspicion, sessions), in the book's own shape,
// and where it is kept (memory or Redis).
import type { LeaseBookRules } from '../../book/lease-book-settings.js';
import { MIN_MAX_SESSIONS } from '../../book/session-book.js';
import { bool, millis, positiveInt, seconds, SettingsError, type FlagReader } from './values.js';

export type LeaseStoreSettings =
  | { kind: 'memory' }
  | {
      kind: 'redis';
      /** redis:// or rediss:// (TLS); a password in it only from the environment, never a flag. */
      url: string;
      /** REDIS_PASSWORD / REDIS_USERNAME (env only: a Secret's keys). */
      password?: string;
      username?: string;
      keyPrefix: string;
      timeoutMs: number;
      /** `--redis-ca-file`: a PEM file of the CAs a rediss:// server is verified against. */
      caFile?: string;
      /** `--redis-allow-eviction`: start on a maxmemory-policy that may evict the book's keys. */
      allowEviction: boolean;
    };

/** The book's rules, built once here and passed whole to whichever store keeps the book. */
export function leaseBookRules(get: FlagReader): LeaseBookRules {
  const [cooldownSeconds, maxCooldownSeconds] = cooldownRange(get, 'cooldown', 'max-cooldown');
  const [rateLimitCooldownSeconds, maxRateLimitCooldownSeconds] = cooldownRange(
    get,
    'rate-limit-cooldown',
    'max-rate-limit-cooldown',
  );
  return {
    cooldownSeconds,
    maxCooldownSeconds,
    rateLimitCooldownSeconds,
    maxRateLimitCooldownSeconds,
    singleCooldownWindow: bool('single-cooldown-window', get('single-cooldown-window')!),
    suspicionTimeoutSeconds: seconds('suspicion-timeout', get('suspicion-timeout')!),
    suspicionHoldoffSeconds: seconds('suspicion-holdoff', get('suspicion-holdoff')!, 0),
    sessionIdleSeconds: seconds('session-idle-timeout', get('session-idle-timeout')!),
    maxSessions: positiveInt('max-sessions', get('max-sessions')!, MIN_MAX_SESSIONS),
  };
}

/** A first cooldown and the longest a streak doubles it to: the longest is never below the first. */
function cooldownRange(get: FlagReader, baseFlag: string, maxFlag: string): [number, number] {
  const base = seconds(baseFlag, get(baseFlag)!);
  const max = seconds(maxFlag, get(maxFlag)!);
  if (max < base) throw new SettingsError(`--${maxFlag}: "${max}" must be at least --${baseFlag} (${base})`);
  return [base, max];
}

/** The lease store flags: a bad combination stops start-up naming the flag. */
export function leaseStore(
  get: FlagReader,
  fromFlag: (flag: string) => boolean,
  env: NodeJS.ProcessEnv,
): LeaseStoreSettings {
  const kind = get('lease-store')!;
  if (kind !== 'memory' && kind !== 'redis')
    throw new SettingsError(`--lease-store: "${kind}" must be memory or redis`);
  const url = get('redis-url');
  if (kind === 'memory') {
    for (const flag of ['redis-url', 'redis-ca-file'])
      if (get(flag) !== undefined)
        throw new SettingsError(
          `--${flag}: given, but --lease-store is memory; add --lease-store=redis to use it`,
        );
    return { kind };
  }
  if (url === undefined)
    throw new SettingsError(
      '--redis-url: required with --lease-store=redis (redis://host:port or rediss://host:port)',
    );
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new SettingsError(
      `--redis-url: "${withoutUserinfo(url)}" is not a URL (redis://host:port[/db] or rediss://host:port[/db])`,
    );
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:')
    throw new SettingsError(`--redis-url: "${parsed.protocol}" must be redis: or rediss: (TLS)`);
  if (parsed.hostname === '') throw new SettingsError(`--redis-url: "${withoutUserinfo(url)}" names no host`);
  if (parsed.pathname !== '' && parsed.pathname !== '/' && !/^\/\d+$/.test(parsed.pathname))
    throw new SettingsError(`--redis-url: path "${parsed.pathname}" must be a database number, e.g. /0`);
  // A flag value shows in the Pod spec and in ps: the password belongs in a Secret.
  if (parsed.password !== '' && fromFlag('redis-url'))
    throw new SettingsError(
      '--redis-url: holds a password; pass it in REDIS_PASSWORD (env, from a Secret) instead of the flag',
    );
  const caFile = get('redis-ca-file');
  if (caFile !== undefined && parsed.protocol !== 'rediss:')
    throw new SettingsError(
      `--redis-ca-file: given, but --redis-url is ${parsed.protocol}// (no TLS); use rediss:// to verify the server against it`,
    );
  const keyPrefix = get('redis-key-prefix')!;
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(keyPrefix))
    throw new SettingsError(
      `--redis-key-prefix: "${keyPrefix}" must be 1-64 letters, digits, '.', '_' or '-'`,
    );
  return {
    kind,
    url,
    ...(env.REDIS_PASSWORD ? { password: env.REDIS_PASSWORD.trim() } : {}),
    ...(env.REDIS_USERNAME ? { username: env.REDIS_USERNAME.trim() } : {}),
    keyPrefix,
    timeoutMs: millis('redis-timeout', get('redis-timeout')!, 10),
    ...(caFile === undefined ? {} : { caFile }),
    allowEviction: bool('redis-allow-eviction', get('redis-allow-eviction')!),
  };
}

/**
 * The URL as an error may show it: REDIS_URL may carry the password (from a Secret), and a
 * start-up error goes to the logs. Everything up to the last '@' goes, whether it parses or not.
 */
function withoutUserinfo(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)?[^]*@/i, '$1***@');
}
