import type { HandlerContext } from '../framework/index.js';
import { CONDITION_HEALTHY, CONDITION_PROVISIONED, type Proxy } from '../crds/proxy-types.js';
import type { StatusIntent } from './proxy-state-machine.js';

/** Values only known after the action ran (the providerID a create returned). */
export interface StatusOverride {
  providerID?: string;
  /** status.exitIP to write in the same patch (null removes it): see exit-ip-status.ts. */
  exitIP?: string | null;
}

/**
 * Writes the intended status as one merge patch of /status; the framework skips it when
 * nothing would change, so a steady proxy costs no writes. Fields the intent leaves
 * undefined are not touched. Returns whether it wrote.
 */
export async function writeStatus(
  ctx: HandlerContext<Proxy>,
  intent: StatusIntent,
  override: StatusOverride,
): Promise<boolean> {
  const proxy = ctx.object;
  const generation = proxy.metadata.generation;
  const stored = proxy.status?.conditions;
  let conditions: typeof stored | ReturnType<typeof ctx.status.setCondition> = stored;
  if (intent.provisioned)
    conditions = ctx.status.setCondition(
      conditions,
      { type: CONDITION_PROVISIONED, ...intent.provisioned },
      generation,
    );
  if (intent.healthy)
    conditions = ctx.status.setCondition(
      conditions,
      { type: CONDITION_HEALTHY, ...intent.healthy },
      generation,
    );
  const patch: Record<string, unknown> = { phase: intent.phase, observedGeneration: generation };
  const providerID = override.providerID ?? intent.providerID;
  if (providerID !== undefined) patch.providerID = providerID;
  if (intent.ip !== undefined) patch.ip = intent.ip;
  // In the same patch as a new instance or address: no reader ever sees the old exit IP on it.
  if (override.exitIP !== undefined) patch.exitIP = override.exitIP;
  if (conditions !== stored) patch.conditions = conditions;
  if (intent.latencyMillis !== undefined) patch.latencyMillis = intent.latencyMillis;
  if (intent.lastHealthCheckTime !== undefined) patch.lastHealthCheckTime = intent.lastHealthCheckTime;
  // null removes it (a merge patch). A record is written whole: merged into the stored one, a
  // repair's record written over a rotation's would keep the rotation's oldInstanceGoneAt.
  if (intent.replacement !== undefined)
    patch.replacement = intent.replacement && { oldInstanceGoneAt: null, ...intent.replacement };
  return ctx.status.patch(patch);
}
