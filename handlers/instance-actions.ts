import type { HandlerContext } from '../framework/index.js';
import { SPEC_HASH_ANNOTATION, type Proxy } from '../crds/proxy-types.js';
import type { CreateRequest, Provider, ProxyCredentials } from '../providers/contract.js';
import { fillCloudInit } from './proxy-credentials.js';
import type { Step } from './proxy-state-machine.js';
import type { StatusOverride } from './proxy-status.js';

/** What a new instance is made of: resolved by the reconciler before the step was decided. */
export interface InstanceMaterial {
  /** The cloud-init text with its credential placeholders still unfilled. */
  cloudInit: string | undefined;
  credentials: ProxyCredentials | undefined;
  /** The spec hash: part of the instance's name at the provider. */
  revision: string | undefined;
}

/** Records the credentials an instance requires beside an annotation (managed-credentials.ts). */
export interface CredentialsRecorder {
  recordInUse(
    ctx: HandlerContext<Proxy>,
    credentials: ProxyCredentials,
    annotations: Record<string, string>,
  ): Promise<void>;
}

/**
 * The provider's create request for the proxy's new instance. Pure. The placeholders are
 * filled only here: the filled text is never stored or logged.
 */
export function createRequest(proxy: Proxy, ownerID: string, made: InstanceMaterial): CreateRequest {
  return {
    uid: proxy.metadata.uid ?? '',
    revision: made.revision,
    proxy: `${proxy.metadata.namespace}/${proxy.metadata.name}`,
    namespace: proxy.metadata.namespace ?? '',
    owner: ownerID,
    port: proxy.spec.port,
    cloudInit: made.cloudInit === undefined ? undefined : fillCloudInit(made.cloudInit, made.credentials),
    ...(made.credentials ? { credentials: made.credentials } : {}),
    placement: proxy.spec.placement ?? {},
  };
}

/**
 * Carries out the step's action at the provider: deletes the instances it names, writes the
 * record of what is about to exist, creates. Returns what only the action knows (the new
 * instance's providerID) for the status write.
 */
export async function actOnStep(
  ctx: HandlerContext<Proxy>,
  provider: Provider,
  step: Step,
  made: InstanceMaterial,
  { ownerID, recorder }: { ownerID: string; recorder: CredentialsRecorder },
): Promise<StatusOverride> {
  const proxy = ctx.object;
  const action = step.action;
  if (action.type === 'delete' || action.type === 'create') {
    const ids = action.type === 'delete' ? action.providerIDs : action.staleInstances;
    for (const id of ids) await provider.delete(id, ctx.signal);
  }
  // The record of what is about to exist, written before it can exist: the revision and the
  // credentials it requires (their copy first, so the record never names a missing one).
  if (step.annotateHash) {
    const hash = { [SPEC_HASH_ANNOTATION]: step.annotateHash };
    if (made.credentials) await recorder.recordInUse(ctx, made.credentials, hash);
    else await ctx.patchMetadata({ annotations: hash });
  }
  if (action.type !== 'create') return {};
  const id = await provider.create(createRequest(proxy, ownerID, made), ctx.signal);
  ctx.logger.info({ provider: proxy.spec.provider, providerID: id }, 'instance creation submitted');
  return { providerID: id };
}
