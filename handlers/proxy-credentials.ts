import { randomBytes } from 'node:crypto';
import {
  BASIC_AUTH_SECRET_TYPE,
  CLOUD_INIT_PLACEHOLDERS,
  CREDENTIALS_SECRET_LABEL,
  IN_USE_COPY_LABEL_VALUE,
  PASSWORD_KEY,
  USERNAME_KEY,
  managedCredentialsSecretName,
} from '../crds/proxy-credentials.js';
import { GROUP, SPEC_HASH_ANNOTATION, type Proxy } from '../crds/proxy-types.js';
import type { KindRef } from '../framework/index.js';
import type { ProxyCredentials } from '../providers/contract.js';
import type { SecretLike, SecretLookup } from './cloud-init.js';
import { credentialsTag, tagNames } from './credentials-digest.js';
import { SECRET_KIND } from './kinds.js';

// Pure decisions about a proxy's basic-auth credentials: which Secret holds them, what it
// says, how the operator makes new ones and how cloud-init receives them. The controller,
// the health runner and the discovery catalog all read them through here, from the cache.

/** The cache view of credentials Secrets (only labelled ones are watched): the proxies' own, and the copies in use. */
export const CREDENTIALS_SECRETS: KindRef = {
  ...SECRET_KIND,
  labelSelector: `${CREDENTIALS_SECRET_LABEL} in (true,${IN_USE_COPY_LABEL_VALUE})`,
};

export type CredentialsResolution =
  /** The proxy needs none (an External proxy without a Secret reference). */
  | { kind: 'none' }
  | { kind: 'ok'; credentials: ProxyCredentials }
  /** A Managed proxy's Secret does not exist yet: the operator generates it. */
  | { kind: 'missing'; secretName: string }
  /** Named Secret unusable; the message names it and what is wrong, never a value. */
  | { kind: 'unavailable'; message: string };

/** The Secret holding the proxy's credentials, or undefined when it needs none. */
export function credentialsSecretName(proxy: Proxy): string | undefined {
  if (proxy.spec.mode === 'External') return proxy.spec.endpoint?.credentialsSecretRef?.name;
  return managedCredentialsSecretName(proxy.metadata.name);
}

/** Why these credentials cannot go into a basic-auth header, or undefined. */
export function credentialsProblem(c: ProxyCredentials): string | undefined {
  if (c.username === '') return `key "${USERNAME_KEY}" is empty`;
  // Basic auth splits user and password at the first colon.
  if (c.username.includes(':')) return `key "${USERNAME_KEY}" contains ":"`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\s]/.test(c.username))
    return `key "${USERNAME_KEY}" contains white space or control characters`;
  if (c.password === '') return `key "${PASSWORD_KEY}" is empty`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(c.password)) return `key "${PASSWORD_KEY}" contains control characters`;
  return undefined;
}

function decoded(secret: SecretLike, key: string): string | undefined {
  const encoded = secret.data?.[key];
  return encoded === undefined ? undefined : Buffer.from(encoded, 'base64').toString('utf8');
}

export function resolveCredentials(proxy: Proxy, lookup: SecretLookup): CredentialsResolution {
  const name = credentialsSecretName(proxy);
  if (name === undefined) return { kind: 'none' };
  const ns = proxy.metadata.namespace ?? 'default';
  const secret = lookup(ns, name);
  if (!secret || secret.metadata?.labels?.[CREDENTIALS_SECRET_LABEL] !== 'true') {
    if (proxy.spec.mode === 'Managed' && !secret) return { kind: 'missing', secretName: name };
    return {
      kind: 'unavailable',
      message: `credentials Secret ${ns}/${name} not found, or not labelled ${CREDENTIALS_SECRET_LABEL}: "true" (the operator only sees labelled Secrets)`,
    };
  }
  const owner = proxy.spec.mode === 'External' ? owningProxy(secret, proxy.metadata.name) : undefined;
  if (owner !== undefined)
    return {
      kind: 'unavailable',
      message: `credentials Secret ${ns}/${name} belongs to Proxy ${owner} (the operator made it for that proxy): an External proxy names a Secret of its own`,
    };
  return credentialsIn(secret, ns, name);
}

/**
 * Another Proxy than `self` that owns the Secret (the operator made it for that Managed proxy),
 * if any. Why an External proxy may not name one: whoever may create a Proxy could point its
 * endpoint at a server of their own and have the probes send that proxy's credentials there.
 */
function owningProxy(secret: SecretLike, self: string): string | undefined {
  return secret.metadata?.ownerReferences?.find(
    (o) => o.kind === 'Proxy' && (o.apiVersion ?? '').split('/')[0] === GROUP && o.name !== self,
  )?.name;
}

/** The credentials a labelled Secret holds, or why they are unusable. */
function credentialsIn(secret: SecretLike, ns: string, name: string): CredentialsResolution {
  const username = decoded(secret, USERNAME_KEY);
  const password = decoded(secret, PASSWORD_KEY);
  if (username === undefined || password === undefined) {
    const absent = [username === undefined ? USERNAME_KEY : '', password === undefined ? PASSWORD_KEY : '']
      .filter(Boolean)
      .join(' and ');
    return { kind: 'unavailable', message: `credentials Secret ${ns}/${name} has no key ${absent}` };
  }
  const problem = credentialsProblem({ username, password });
  if (problem) return { kind: 'unavailable', message: `credentials Secret ${ns}/${name}: ${problem}` };
  return { kind: 'ok', credentials: { username, password } };
}

/**
 * New credentials for a Managed proxy: URL-safe, so they fit a proxy URL, a passwd file and
 * any cloud-init placeholder without escaping. 144 bits of password.
 */
export function generateCredentials(random: (bytes: number) => Buffer = randomBytes): ProxyCredentials {
  return {
    username: `proxy-${random(6).toString('hex')}`,
    password: random(18).toString('base64url'),
  };
}

/** The Secret the operator creates for a Managed proxy (the owner reference is added on create). */
export function credentialsSecret(proxy: Proxy, credentials: ProxyCredentials) {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: BASIC_AUTH_SECRET_TYPE,
    metadata: {
      name: managedCredentialsSecretName(proxy.metadata.name),
      labels: { [CREDENTIALS_SECRET_LABEL]: 'true' },
    },
    data: {
      [USERNAME_KEY]: Buffer.from(credentials.username).toString('base64'),
      [PASSWORD_KEY]: Buffer.from(credentials.password).toString('base64'),
    },
  };
}

/** Cloud-init with the credential placeholders filled in (crds/proxy-credentials.ts). */
export function fillCloudInit(text: string, credentials: ProxyCredentials | undefined): string {
  return text
    .replaceAll(CLOUD_INIT_PLACEHOLDERS.username, credentials?.username ?? '')
    .replaceAll(CLOUD_INIT_PLACEHOLDERS.password, credentials?.password ?? '');
}

/** The Proxies in the Secret's namespace whose credentials it holds (wanted, or in use by the instance). */
export function proxiesUsingCredentials(secret: SecretLike, proxies: readonly Proxy[]): Proxy[] {
  const ns = secret.metadata?.namespace;
  const name = secret.metadata?.name;
  return proxies.filter(
    (p) =>
      (p.metadata.namespace ?? 'default') === ns &&
      name !== undefined &&
      (credentialsSecretName(p) === name || inUseSecretNameOf(p) === name),
  );
}

// Credential rotation without an outage: a Managed instance requires the credentials it was
// created with, so it is probed and leased with those until its replacement is Ready, not with
// the Secret's new ones (which it would answer 407). Before each create the operator copies the
// credentials into an immutable Secret of their own, named by their fingerprint and owned by
// the Proxy, and records the fingerprint in an annotation beside the spec hash: the record of
// what is about to exist says which credentials the instance requires. The tag is keyed
// (credentials-digest.ts): the annotation is no test of a guessed password.

/** The credentials (their tag, credentials-digest.ts) the recorded revision was created with. */
export const CREDENTIALS_IN_USE_ANNOTATION = 'crawl.example.com/credentials-in-use';

/** The Secret holding the credentials tagged `tag` of Managed proxy `proxyName`. */
export function inUseSecretName(proxyName: string, tag: string): string {
  return `${managedCredentialsSecretName(proxyName).slice(0, 253 - 1 - tag.length)}-${tag}`;
}

function inUseSecretNameOf(p: Proxy): string | undefined {
  const tag = p.metadata.annotations?.[CREDENTIALS_IN_USE_ANNOTATION];
  return p.spec.mode === 'Managed' && tag ? inUseSecretName(p.metadata.name, tag) : undefined;
}

/** The copy of the credentials an instance is created with (the owner reference is added on create). */
export function inUseSecret(proxy: Proxy, credentials: ProxyCredentials, key: Buffer) {
  const secret = credentialsSecret(proxy, credentials);
  return {
    ...secret,
    metadata: {
      name: inUseSecretName(proxy.metadata.name, credentialsTag(credentials, key)),
      labels: { [CREDENTIALS_SECRET_LABEL]: IN_USE_COPY_LABEL_VALUE },
    },
    // Never edited: new credentials are a new Secret.
    immutable: true,
  };
}

/**
 * The credentials to probe and lease the proxy with: for a Managed proxy, the ones its recorded
 * revision was created with (while their copy is readable); else, and for External proxies
 * (which switch at once), its Secret's.
 */
export function servingCredentials(proxy: Proxy, lookup: SecretLookup): CredentialsResolution {
  const name = inUseSecretNameOf(proxy);
  if (name !== undefined) {
    const ns = proxy.metadata.namespace ?? 'default';
    const secret = lookup(ns, name);
    const label = secret?.metadata?.labels?.[CREDENTIALS_SECRET_LABEL];
    // "true": a copy made before the copies had a value of their own.
    if (secret && (label === IN_USE_COPY_LABEL_VALUE || label === 'true')) {
      const found = credentialsIn(secret, ns, name);
      if (found.kind === 'ok') return found;
    }
  }
  return resolveCredentials(proxy, lookup);
}

/**
 * Whether the proxy's instance was created with other credentials than `current`: a rotation,
 * which always takes a --max-unavailable slot (the instance serves until it is replaced).
 * Unknown (no record, an instance older than the record) is no. A record of an earlier version
 * (unkeyed) is compared in its own form.
 */
export function credentialsRotated(
  proxy: Proxy,
  current: ProxyCredentials | undefined,
  key: Buffer,
): boolean {
  const tag = proxy.metadata.annotations?.[CREDENTIALS_IN_USE_ANNOTATION];
  return tag !== undefined && current !== undefined && !tagNames(tag, current, key);
}

/** What the reconciler does about a Managed proxy's credentials this run. */
export type CredentialsAnswer =
  | { kind: 'ok'; credentials: ProxyCredentials }
  /** They cannot be had; the message says why (the proxy's Provisioned condition shows it). */
  | { kind: 'unusable'; message: string }
  /** No Secret yet and none generated by this process: generate one named `secretName`. */
  | { kind: 'generate'; secretName: string };

/**
 * The answer from what the cache holds (`found`) and the credentials this process generated
 * whose Secret the cache does not show yet (`pending`): those are used rather than generated
 * again, which would meet a 409 and put a second password in play.
 */
export function credentialsAnswer(
  found: CredentialsResolution,
  pending: ProxyCredentials | undefined,
): CredentialsAnswer {
  switch (found.kind) {
    case 'ok':
      return { kind: 'ok', credentials: found.credentials };
    case 'unavailable':
      return { kind: 'unusable', message: found.message };
    case 'none':
      return { kind: 'unusable', message: 'a Managed proxy always has credentials' };
    case 'missing':
      return pending
        ? { kind: 'ok', credentials: pending }
        : { kind: 'generate', secretName: found.secretName };
  }
}

/**
 * Whether the proxy's instance was made before its credentials were recorded: the recorded
 * revision is the one wanted now (so the instance was created with the Secret's credentials),
 * and no credentials-in-use record names them. The reconciler records them at once, while they
 * are still the Secret's, so a later rotation keeps the instance serving.
 */
export function credentialsRecordMissing(proxy: Proxy, desiredHash: string | undefined): boolean {
  const annotations = proxy.metadata.annotations;
  return (
    desiredHash !== undefined &&
    annotations?.[SPEC_HASH_ANNOTATION] === desiredHash &&
    Boolean(proxy.status?.providerID) &&
    annotations?.[CREDENTIALS_IN_USE_ANNOTATION] === undefined
  );
}
