import type { Logger } from 'pino';
import { MERGE_PATCH, type KubeClient } from '../utils/kube-client.js';
import { objectLogger } from '../utils/logger.js';
import { withStopHelpers } from '../utils/sleep.js';
import { ObjectEventRecorder } from './event-recorder.js';
import { ObjectStatusWriter } from './status-writer.js';
import {
  apiPath,
  type CacheReader,
  type Cause,
  type HandlerContext,
  keyOf,
  type KindRef,
  type KubeObject,
  type MetadataPatch,
  type RequeueOptions,
} from './types.js';

export interface ContextDeps {
  client: KubeClient;
  kind: KindRef;
  cache: CacheReader;
  logger: Logger;
  component: string;
  /** Called after every status write that reached the API server (a metric). */
  onStatusWrite?: () => void;
  /** Hands the object of `key` to the controller's work queue. */
  requeue: (key: string, options: RequeueOptions) => void;
}

function apiVersionOf(kind: KindRef): string {
  return kind.group ? `${kind.group}/${kind.version}` : kind.version;
}

/**
 * Builds what a handler receives. Every write it offers is bound to `signal`, so a handler
 * still running after its operator was stopped or killed cannot change the cluster.
 */
export function handlerContext<T extends KubeObject>(
  deps: ContextDeps,
  object: T,
  cause: Cause,
  signal: AbortSignal,
): HandlerContext<T> {
  const copy = structuredClone(object);
  const { namespace, name } = copy.metadata;
  const logger = objectLogger(deps.logger, deps.kind.kind, namespace, name ?? '').child({ cause });
  return withStopHelpers(signal, {
    object: copy,
    cause,
    logger,
    status: new ObjectStatusWriter(deps.client, deps.kind, copy, signal, deps.onStatusWrite),
    events: new ObjectEventRecorder(deps.client, copy, deps.component, logger, signal),
    cache: deps.cache,
    patchMetadata: (patch: MetadataPatch) =>
      deps.client.request<T>('PATCH', apiPath(deps.kind, namespace, name), {
        body: { metadata: patch },
        contentType: MERGE_PATCH,
        signal: AbortSignal.any([signal, AbortSignal.timeout(30_000)]),
      }),
    createOwned: <C extends KubeObject>(kind: KindRef, child: C) =>
      deps.client.request<C>('POST', apiPath(kind, namespace), {
        body: {
          ...child,
          metadata: {
            ...child.metadata,
            namespace,
            ownerReferences: [
              {
                apiVersion: copy.apiVersion ?? apiVersionOf(deps.kind),
                kind: copy.kind ?? deps.kind.kind,
                name: name ?? '',
                uid: copy.metadata.uid ?? '',
                controller: true,
                blockOwnerDeletion: false,
              },
            ],
          },
        },
        signal: AbortSignal.any([signal, AbortSignal.timeout(30_000)]),
      }),
    requeue: (options: RequeueOptions = {}) => deps.requeue(keyOf(namespace, name ?? ''), options),
  });
}
