// How a proxy's basic-auth credentials are stored and handed on: the contract between the
// Proxy resource, the operator and whoever writes cloud-init for Managed proxies.

/**
 * Only Secrets with this label are visible to the operator as credentials (the label of the
 * Secrets the operator generates, and the one an External proxy's Secret must carry).
 */
export const CREDENTIALS_SECRET_LABEL = 'crawl.example.com/proxy-credentials';
/**
 * The label's value on the operator's immutable copies of the credentials an instance was
 * created with (not "true": `kubectl delete secret -l <label>=true`, a documented way to rotate
 * every proxy's credentials, must not take the copies the instances still serve with).
 */
export const IN_USE_COPY_LABEL_VALUE = 'in-use';
/** The keys of a kubernetes.io/basic-auth Secret. */
export const USERNAME_KEY = 'username';
export const PASSWORD_KEY = 'password';
export const BASIC_AUTH_SECRET_TYPE = 'kubernetes.io/basic-auth';

/**
 * The Secret a Managed proxy's credentials live in: `<proxy name>-proxy-credentials` in the
 * Proxy's namespace, owned by the Proxy (deleted with it). Rotate by editing it.
 */
export function managedCredentialsSecretName(proxyName: string): string {
  // Secret names are DNS subdomains (<= 253); Proxy names are too, so only the length can overflow.
  return `${proxyName.slice(0, 253 - 18)}-proxy-credentials`;
}

/**
 * Named placeholders the operator replaces in a Managed proxy's cloud-init before the provider
 * sees it, so a VM's proxy software can require the same credentials the operator probes with
 * and discovery hands out. The values are URL-safe (generated) or as stored (rotated by hand).
 */
export const CLOUD_INIT_PLACEHOLDERS = {
  username: '{{proxy.username}}',
  password: '{{proxy.password}}',
} as const;

/**
 * The Secret in the operator's own namespace holding the key its credentials digests are keyed
 * with (handlers/credentials-digest.ts): created once by the controller, immutable, and read
 * by name (the RBAC names it). Deleting it changes every digest: see docs/security.md.
 */
export const CREDENTIALS_KEY_SECRET = 'proxy-operator-credentials-key';
/** The key's field in that Secret. */
export const CREDENTIALS_KEY_FIELD = 'key';
