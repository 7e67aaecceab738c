// The discovery API's flags: its address and TLS, how clients authenticate, and its rate limit.
import { MIN_TOKEN_LENGTH } from '../../book/api-tokens.js';
import type { DiscoverySettings } from '../../handlers/settings.js';
import {
  address,
  bool,
  positiveInt,
  positiveNumber,
  seconds,
  SettingsError,
  type FlagReader,
} from './values.js';

export type DiscoveryAuth =
  /** Named tokens from a file, re-read on change. */
  | { kind: 'tokens-file'; path: string }
  /** One token from DISCOVERY_TOKEN, named "default". */
  | { kind: 'token'; token: string }
  /** --discovery-unauthenticated: said explicitly, warned about at start-up. */
  | { kind: 'none' };

/** The API's settings but its tokens, which come from `discoveryAuth`. */
export type DiscoveryFlags = Omit<DiscoverySettings, 'token' | 'tokensFile'> &
  Required<
    Pick<
      DiscoverySettings,
      'rateLimit' | 'metricsTargetNames' | 'sessionQuota' | 'leaseQuota' | 'cooldownQuota' | 'fairShare'
    >
  >;

export function discoveryFlags(get: FlagReader): DiscoveryFlags {
  return {
    ...address('discovery-address', get('discovery-address')!),
    metricsTargetNames: bool('metrics-target-names', get('metrics-target-names')!),
    ...discoveryTLS(get('discovery-tls-cert'), get('discovery-tls-key')),
    rateLimit: {
      ratePerSecond: positiveNumber('discovery-rate-limit', get('discovery-rate-limit')!),
      burst: positiveInt('discovery-rate-burst', get('discovery-rate-burst')!),
    },
    fairShare: {
      inFlight: positiveInt('discovery-book-concurrency', get('discovery-book-concurrency')!),
      queuedPerToken: positiveInt('discovery-book-queue', get('discovery-book-queue')!),
    },
    maxLeaseTTLSeconds: seconds('max-lease-ttl', get('max-lease-ttl')!),
    sessionQuota: positiveInt('discovery-session-quota', get('discovery-session-quota')!),
    leaseQuota: positiveInt('discovery-lease-quota', get('discovery-lease-quota')!),
    cooldownQuota: positiveInt('discovery-cooldown-quota', get('discovery-cooldown-quota')!),
  };
}

/**
 * How the API authenticates: a tokens file, one token, or, said explicitly, nothing. Only a
 * process that serves the API needs one; a bad combination stops start-up naming the key.
 */
export function discoveryAuth(get: FlagReader, env: NodeJS.ProcessEnv, serves: boolean): DiscoveryAuth {
  const path = get('discovery-tokens-file');
  const token = bearerToken(env.DISCOVERY_TOKEN);
  const open = bool('discovery-unauthenticated', get('discovery-unauthenticated')!);
  if (path !== undefined && token !== '')
    throw new SettingsError(
      '--discovery-tokens-file: given together with DISCOVERY_TOKEN; put that token in the file under a name',
    );
  if (open && (path !== undefined || token !== ''))
    throw new SettingsError(
      '--discovery-unauthenticated: given together with a token (--discovery-tokens-file or DISCOVERY_TOKEN); choose one',
    );
  if (path !== undefined) return { kind: 'tokens-file', path };
  if (token !== '') return { kind: 'token', token };
  if (open || !serves) return { kind: 'none' };
  throw new SettingsError(
    '--discovery-tokens-file: the discovery API needs a token: mount a tokens file (or set DISCOVERY_TOKEN), or pass --discovery-unauthenticated=true to serve it without authentication',
  );
}
/** Both files or neither: a certificate without its key (or the reverse) is a mistake. */
function discoveryTLS(
  certFile: string | undefined,
  keyFile: string | undefined,
): { tls?: { certFile: string; keyFile: string } } {
  if (certFile === undefined && keyFile === undefined) return {};
  if (certFile === undefined)
    throw new SettingsError('--discovery-tls-cert: required with --discovery-tls-key');
  if (keyFile === undefined)
    throw new SettingsError('--discovery-tls-key: required with --discovery-tls-cert');
  return { tls: { certFile, keyFile } };
}
/**
 * The API token. A Secret made from a file (`--from-file`) ends in a newline: surrounding
 * whitespace is dropped. Whitespace inside can never be sent as a bearer token, so it is an error.
 */
function bearerToken(value: string | undefined): string {
  const token = (value ?? '').trim();
  if (/\s/.test(token))
    throw new SettingsError('DISCOVERY_TOKEN: must not contain whitespace inside the token');
  if (token !== '' && token.length < MIN_TOKEN_LENGTH)
    throw new SettingsError(
      `DISCOVERY_TOKEN: must be at least ${MIN_TOKEN_LENGTH} characters (got ${token.length}); \`openssl rand -hex 24\` makes one`,
    );
  return token;
}
