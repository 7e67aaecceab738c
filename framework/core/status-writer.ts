import { mergePatchIsNoop } from '../utils/merge-patch.js';
import { MERGE_PATCH, type KubeClient } from '../utils/kube-client.js';
import { apiPath, type Condition, type KindRef, type KubeObject, type StatusWriter } from './types.js';

/** Upserts `condition`; lastTransitionTime only moves when the condition's status changes. */
export function setCondition(
  conditions: Condition[] | undefined,
  condition: Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>,
  observedGeneration?: number,
  now: () => Date = () => new Date(),
): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === condition.type);
  const previous = i >= 0 ? list[i] : undefined;
  const next: Condition = {
    ...condition,
    lastTransitionTime:
      previous && previous.status === condition.status && previous.lastTransitionTime
        ? previous.lastTransitionTime
        : now()
            .toISOString()
            .replace(/\.\d{3}Z$/, 'Z'),
    ...(observedGeneration !== undefined ? { observedGeneration } : {}),
  };
  if (i >= 0) list[i] = next;
  else list.push(next);
  return list;
}

/** Writes /status of one object with merge patches, skipping writes that change nothing. */
export class ObjectStatusWriter implements StatusWriter {
  constructor(
    private readonly client: KubeClient,
    private readonly kind: KindRef,
    private readonly object: KubeObject & { status?: Record<string, unknown> },
    private readonly signal: AbortSignal,
    private readonly onWrite: () => void = () => {},
  ) {}

  async patch(partialStatus: Record<string, unknown>): Promise<boolean> {
    if (mergePatchIsNoop(this.object.status, partialStatus)) return false;
    const { namespace, name } = this.object.metadata;
    const updated = await this.client.request<{ status?: Record<string, unknown> }>(
      'PATCH',
      apiPath(this.kind, namespace, name, 'status'),
      {
        body: { status: partialStatus },
        contentType: MERGE_PATCH,
        signal: AbortSignal.any([this.signal, AbortSignal.timeout(30_000)]),
      },
    );
    this.onWrite();
    // Later patches in the same handler compare against what the server now holds.
    this.object.status = updated.status;
    return true;
  }

  setCondition(
    conditions: Condition[] | undefined,
    condition: Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>,
    observedGeneration?: number,
  ): Condition[] {
    return setCondition(conditions, condition, observedGeneration);
  }
}
