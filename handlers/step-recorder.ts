import { Counter, type Registry } from 'prom-client';
import type { HandlerContext } from '../framework/index.js';
import type { Proxy } from '../crds/proxy-types.js';
import { exitIPUpdate, servedAfter } from './exit-ip-status.js';
import { exitIPSource, probeTargetOf } from './probe-target.js';
import { proxyKey } from './proxy-address.js';
import type { Step } from './proxy-state-machine.js';
import { writeStatus, type StatusOverride } from './proxy-status.js';
import type { RepairHoldReason } from './repair-hold.js';
import { holdsSlot } from './replacement-budget.js';
import { stepOutputs } from './step-outcome.js';
import type { VerdictBoard } from './verdict-board.js';

/** The parts of the reconciler's memory a written step updates (interfaces owned here). */
export interface StepMemory {
  /** The replacement budget: a slot goes back once the status no longer holds it. */
  budget: { release(key: string): void };
  /** The repairs holding now (held-repairs.ts). */
  holds: { note(key: string, provider: string, reason: RepairHoldReason | undefined): void };
  /** The health engine's exit-IP readings. */
  verdicts: Pick<VerdictBoard, 'exitIP'>;
}

/**
 * Writes what a state-machine step decided: the status (with status.exitIP beside it), the
 * Events and logs if that changed anything, the replacements metric, and the memory the step
 * updates (the budget's slot, the held repairs).
 */
export class StepRecorder {
  /** proxy_operator_replacements_total{provider,cause}: why proxies that served got new instances. */
  private readonly replacements: Counter<'provider' | 'cause'>;

  constructor(
    private readonly memory: StepMemory,
    registry: Registry,
  ) {
    this.replacements = new Counter({
      name: 'proxy_operator_replacements_total',
      help: 'Replacements of proxies that had served, by provider and cause (SpecChanged, InstanceDead, InstanceGone, Unhealthy, Rotation).',
      labelNames: ['provider', 'cause'],
      registers: [registry],
    });
  }

  async record(ctx: HandlerContext<Proxy>, step: Step, override: StatusOverride): Promise<void> {
    const proxy = ctx.object;
    const key = proxyKey(proxy);
    const provider = proxy.spec.provider ?? '';
    this.memory.holds.note(key, provider, step.repairHeld);
    const exitIP = this.exitIPUpdate(proxy, step, override);
    let changed = true;
    if (step.status) {
      // A drain keeps its grant until the instance is replaced, on every run of the drain.
      if (!holdsSlot(proxy.status?.replacement, step.status)) this.memory.budget.release(key);
      changed = await writeStatus(ctx, step.status, {
        ...override,
        ...(exitIP ? { exitIP: exitIP.exitIP } : {}),
      });
    }
    if (changed && step.startsReplacement) this.replacements.inc({ provider, cause: step.startsReplacement });
    const { events, logs } = stepOutputs(step, changed);
    for (const e of events) {
      if (e.type === 'Warning') await ctx.events.warning(e.reason, e.message);
      else await ctx.events.normal(e.reason, e.message);
    }
    for (const l of logs) ctx.logger[l.level](l.fields ?? {}, l.message);
    if (!exitIP) return;
    // With no status in the step, the exit IP is a patch of its own; it compares against the
    // status the step's own write returned (see StatusWriter).
    const wrote = step.status ? changed : await ctx.status.patch({ exitIP: exitIP.exitIP });
    if (wrote && exitIP.event) {
      await ctx.events.normal(exitIP.event.reason, exitIP.event.message);
      ctx.logger.info({ exitIP: exitIP.exitIP }, exitIP.event.message);
    }
  }

  /**
   * status.exitIP is the health runner's reading through what serves the proxy once the step
   * is written (its instance and address), kept apart from the state machine's decision.
   */
  private exitIPUpdate(proxy: Proxy, step: Step, override: StatusOverride) {
    const served = servedAfter(proxy, step.status, override);
    const after = {
      ...proxy,
      status: { ...proxy.status, providerID: served.providerID ?? undefined, ip: served.ip ?? undefined },
    };
    const target = probeTargetOf(after);
    const observed = target ? this.memory.verdicts.exitIP(proxyKey(proxy), exitIPSource(target)) : undefined;
    return exitIPUpdate(proxy, served, observed);
  }
}
