import type { CacheReader, ObjectKey } from '../framework/index.js';
import type { ProxyRecord } from '../book/catalog.js';
import { IndexedCatalog } from '../book/indexed-catalog.js';
import { CONDITION_HEALTHY, type Proxy } from '../crds/proxy-types.js';
import { PROXY_KIND } from './kinds.js';
import { isDraining } from './replacement-budget.js';
import { proxyEndpoint, proxyKey, servedEndpoint } from './proxy-address.js';
import type { SecretLike, SecretLookup } from './cloud-init.js';
import { CREDENTIALS_SECRETS, proxiesUsingCredentials, servingCredentials } from './proxy-credentials.js';

/**
 * The discovery API's view of the Proxy cache, kept up to date change by change from the
 * cache's events (a lease or list never re-reads the fleet). Health comes from status, so
 * every replica serves the verdicts the leader wrote. A Proxy being deleted leaves at once.
 */
export class CachedProxyCatalog {
  readonly catalog = new IndexedCatalog();
  private detach: (() => void) | undefined;
  private lookup: SecretLookup = () => undefined;

  /**
   * Loads every cached Proxy, then follows the cache (in one synchronous step: nothing is
   * missed), and the credentials Secrets too: a rotation reaches the next lease at once.
   */
  attach(cache: CacheReader): void {
    this.detach?.();
    this.lookup = (ns, name) =>
      cache.get<SecretLike & { metadata: { name: string } }>(CREDENTIALS_SECRETS, ns, name);
    const record = (p: Proxy) => toRecord(p, this.lookup);
    this.catalog.replaceAll(cache.list<Proxy>(PROXY_KIND).filter(isListed).map(record));
    const proxies = cache.onChange<Proxy>(PROXY_KIND, (key, proxy) => this.changed(key, proxy));
    const secrets = cache.onChange<SecretLike & { metadata: { name: string } }>(
      CREDENTIALS_SECRETS,
      (key) => {
        const secret = { metadata: { namespace: key.namespace, name: key.name } };
        for (const p of proxiesUsingCredentials(secret, cache.list<Proxy>(PROXY_KIND)))
          if (isListed(p)) this.catalog.upsert(record(p));
      },
    );
    this.detach = () => {
      proxies();
      secrets();
    };
  }

  detachFromCache(): void {
    this.detach?.();
    this.detach = undefined;
  }

  private changed(key: ObjectKey, proxy: Proxy | undefined): void {
    if (proxy !== undefined && isListed(proxy)) this.catalog.upsert(toRecord(proxy, this.lookup));
    else this.catalog.remove(`${key.namespace}/${key.name}`);
  }
}

function isListed(p: Proxy): boolean {
  return !p.metadata.deletionTimestamp;
}

export function toRecord(p: Proxy, lookup: SecretLookup = () => undefined): ProxyRecord {
  // A host that is not one address is never handed out: listed without one, unhealthy, never leased.
  const endpoint = servedEndpoint(p);
  const misread = endpoint === undefined && proxyEndpoint(p) !== undefined;
  const condition = p.status?.conditions?.find((c) => c.type === CONDITION_HEALTHY);
  const healthy = !misread && condition?.status === 'True';
  const served = healthy && p.status?.phase === 'Ready';
  // Why not healthy, for a person asking the API (leasability.ts): the condition's reason.
  // (Healthy but not Ready, e.g. Deleting: the phase says why, not the condition.)
  const healthReason = misread ? 'HostNotAnAddress' : healthy ? undefined : condition?.reason;
  return {
    id: proxyKey(p),
    ip: endpoint?.host ?? '',
    port: endpoint?.port ?? p.spec.port,
    attributes: { ...(p.spec.attributes ?? {}) },
    phase: p.status?.phase ?? 'Pending',
    healthy: served,
    ...(isDraining(p) ? { draining: true } : {}),
    ...(healthReason === undefined || healthReason === '' ? {} : { healthReason }),
    latencyMillis: p.status?.latencyMillis ?? 0,
    ...(p.status?.exitIP === undefined ? {} : { exitIP: p.status.exitIP }),
    maxLeases: p.spec.maxLeases,
    ...(p.spec.mode === 'External' ? { guarded: true } : {}),
    ...credentialsOf(p, lookup),
  };
}

/**
 * The credentials discovery hands out with a lease: those the proxy's instance requires (a
 * rotated Managed proxy's old ones until it is replaced); none when unresolvable (probes then
 * say why).
 */
function credentialsOf(p: Proxy, lookup: SecretLookup): Pick<ProxyRecord, 'credentials'> {
  const found = servingCredentials(p, lookup);
  return found.kind === 'ok' ? { credentials: found.credentials } : {};
}
