import type { Proxy } from '../crds/proxy-types.js';
import { CLOUD_INIT_SECRET_LABEL } from '../crds/proxy-types.js';

/** The parts of a core/v1 Secret the resolver reads. */
export interface SecretLike {
  metadata?: {
    name?: string;
    namespace?: string;
    labels?: Record<string, string>;
    ownerReferences?: readonly { apiVersion?: string; kind?: string; name?: string }[];
  };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

/** Looks a Secret up in the operator's cache, which holds only labelled Secrets. */
export type SecretLookup = (namespace: string, name: string) => SecretLike | undefined;

export type CloudInitResolution = { ok: true; content: string | undefined } | { ok: false; message: string };

export function resolveCloudInit(proxy: Proxy, lookup: SecretLookup): CloudInitResolution {
  const ci = proxy.spec.cloudInit;
  if (!ci) return { ok: true, content: undefined };
  if (ci.inline !== undefined) return { ok: true, content: ci.inline };
  if (!ci.secretRef) return { ok: true, content: undefined };
  const ns = proxy.metadata.namespace ?? 'default';
  const { name, key } = ci.secretRef;
  const secret = lookup(ns, name);
  // The cache never holds unlabelled Secrets, so "missing" and "unlabelled" look alike here;
  // the message names both so the SRE knows what to check.
  if (!secret || secret.metadata?.labels?.[CLOUD_INIT_SECRET_LABEL] !== 'true') {
    return {
      ok: false,
      message: `Secret ${ns}/${name} not found, or not labelled ${CLOUD_INIT_SECRET_LABEL}: "true" (the operator only sees labelled Secrets)`,
    };
  }
  const encoded = secret.data?.[key];
  if (encoded === undefined) {
    return { ok: false, message: `Secret ${ns}/${name} has no key "${key}"` };
  }
  return { ok: true, content: Buffer.from(encoded, 'base64').toString('utf8') };
}

/** The Proxies in the Secret's namespace whose cloud-init references it. */
export function proxiesUsingSecret(secret: SecretLike, proxies: readonly Proxy[]): Proxy[] {
  const ns = secret.metadata?.namespace;
  const name = secret.metadata?.name;
  return proxies.filter(
    (p) => (p.metadata.namespace ?? 'default') === ns && p.spec.cloudInit?.secretRef?.name === name,
  );
}
