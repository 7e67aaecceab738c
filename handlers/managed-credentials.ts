import { isStatus, type HandlerContext } from '../framework/index.js';
import { CREDENTIALS_SECRET_LABEL } from '../crds/proxy-credentials.js';
import type { Proxy } from '../crds/proxy-types.js';
import type { ProxyCredentials } from '../providers/contract.js';
import type { SecretLike } from './cloud-init.js';
import { credentialsTag } from './credentials-digest.js';
import { SECRET_KIND } from './kinds.js';
import { proxyKey } from './proxy-address.js';
import {
  CREDENTIALS_IN_USE_ANNOTATION,
  CREDENTIALS_SECRETS,
  credentialsAnswer,
  credentialsSecret,
  generateCredentials,
  inUseSecret,
  resolveCredentials,
} from './proxy-credentials.js';

/** The credentials a Managed proxy's instance requires, or why they cannot be had. */
export type Credentials =
  | { ok: true; credentials: ProxyCredentials }
  | { ok: false; message: string }
  /** Just generated: the Secret's watch event (or a short requeue) runs the reconcile again. */
  | { ok: false; generated: true };

/**
 * The reconciler's hands on a Managed proxy's credentials Secrets: it reads the proxy's Secret
 * from the cache, generates a missing one (owned by the Proxy, so it goes with it), and copies
 * the credentials an instance is created with into their own Secret. The decisions are pure
 * (proxy-credentials.ts); this class only creates and remembers.
 */
export class ManagedCredentials {
  /**
   * Credentials this process generated whose Secret the cache does not show yet: the next
   * reconcile (often triggered by its own status write) uses them instead of meeting a 409.
   */
  private readonly generated = new Map<string, ProxyCredentials>();

  /** `key`: the operator's credentials key, which the in-use tags are keyed with (credentials-digest.ts). */
  constructor(private readonly key: () => Promise<Buffer>) {}

  /** The proxy's credentials from its Secret, generating the Secret when it is missing. */
  async resolve(ctx: HandlerContext<Proxy>): Promise<Credentials> {
    const proxy = ctx.object;
    const found = resolveCredentials(proxy, (ns, name) =>
      ctx.cache.get<SecretLike & { metadata: { name: string } }>(CREDENTIALS_SECRETS, ns, name),
    );
    const key = proxyKey(proxy);
    if (found.kind !== 'missing') this.generated.delete(key);
    const answer = credentialsAnswer(found, this.generated.get(key));
    if (answer.kind === 'ok') return { ok: true, credentials: answer.credentials };
    if (answer.kind === 'unusable') return { ok: false, message: answer.message };
    const credentials = generateCredentials();
    try {
      await ctx.createOwned(SECRET_KIND, credentialsSecret(proxy, credentials));
      this.generated.set(key, credentials);
      ctx.logger.info({ secret: answer.secretName }, 'generated the proxy credentials Secret');
      return { ok: false, generated: true };
    } catch (err) {
      if (!isStatus(err, 409)) throw err;
      return {
        ok: false,
        message: `credentials Secret ${proxy.metadata.namespace}/${answer.secretName} exists but the operator cannot see it: label it ${CREDENTIALS_SECRET_LABEL}: "true", or delete it to have new credentials generated`,
      };
    }
  }

  /**
   * Copies `credentials` into their own immutable Secret (owned by the Proxy) and records their
   * tag beside `annotations`: what the instance about to exist requires (proxy-credentials.ts).
   */
  async recordInUse(
    ctx: HandlerContext<Proxy>,
    credentials: ProxyCredentials,
    annotations: Record<string, string>,
  ): Promise<void> {
    const key = await this.key();
    try {
      await ctx.createOwned(SECRET_KIND, inUseSecret(ctx.object, credentials, key));
    } catch (err) {
      // Made by an earlier run (or an earlier rotation back to the same credentials).
      if (!isStatus(err, 409)) throw err;
    }
    await ctx.patchMetadata({
      annotations: { ...annotations, [CREDENTIALS_IN_USE_ANNOTATION]: credentialsTag(credentials, key) },
    });
  }

  /** The proxy is gone: nothing generated for it is pending any more. */
  forget(key: string): void {
    this.generated.delete(key);
  }
}
