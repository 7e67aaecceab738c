// Every provider failure and a provider that is not configured: what the proxy keeps and how
// it is retried.
import {
  type ProvisionedReason,
  type Proxy,
  type ProxyPhase,
  SPEC_HASH_ANNOTATION,
} from '../../crds/proxy-types.js';
import {
  type ProviderErrorKind,
  type ProviderOperation,
  QUOTA_RETRY_SECONDS,
} from '../../providers/errors.js';
import { AWAITING_PROBE, finish, type Health, healthOf } from './status.js';
import {
  type ConditionIntent,
  CONFIG_RETRY_SECONDS,
  type EventIntent,
  type HealthVerdict,
  type LogIntent,
  type Next,
  type Step,
} from './types.js';

/** A provider call that failed, as the state machine needs to know it. */
export interface ProviderFailure {
  provider: string;
  operation: ProviderOperation;
  kind: ProviderErrorKind;
  message: string;
}

/**
 * The phase a failure keeps: a running proxy stays in service (its health still follows the
 * probes), anything else stays where it was.
 */
export function keptPhase(proxy: Proxy, h: Health): ProxyPhase {
  const phase = proxy.status?.phase ?? 'Pending';
  if (phase === 'Ready' || phase === 'Unhealthy') return h.phase ?? phase;
  return phase;
}

/**
 * Every provider failure. Only a create the provider calls hopeless fails the proxy; an error
 * from get, delete or list (a permission blip, a timeout, a cloud not ready) keeps the phase
 * and retries with backoff, and a quota retries slowly.
 */
export function providerErrorStep(inp: {
  proxy: Proxy;
  verdict?: HealthVerdict;
  failure: ProviderFailure;
  deleting: boolean;
}): Step {
  const { proxy, failure } = inp;
  const h = healthOf(proxy, inp.verdict, true);
  const log: LogIntent = {
    level: 'error',
    message: 'provider error',
    fields: {
      provider: failure.provider,
      operation: failure.operation,
      kind: failure.kind,
      err: failure.message,
    },
  };
  const keep = (
    provisioned: ConditionIntent<ProvisionedReason>,
    next: Next,
    event: EventIntent | undefined,
  ): Step =>
    finish(proxy, {
      action: { type: 'none' },
      status: {
        phase: inp.deleting ? 'Deleting' : keptPhase(proxy, h),
        provisioned,
        ...(inp.deleting ? {} : { healthy: h.condition, ...h.extra }),
      },
      events: event ? [event] : [],
      logs: [log],
      next,
    });
  if (!inp.deleting && failure.operation === 'create' && failure.kind === 'QuotaExceeded') {
    const message = `quota exceeded at provider ${failure.provider}: ${failure.message}; retrying in ${QUOTA_RETRY_SECONDS} s`;
    return keep(
      { status: 'False', reason: 'QuotaExceeded', message },
      { kind: 'requeue', seconds: QUOTA_RETRY_SECONDS },
      { type: 'Warning', reason: 'QuotaExceeded', message },
    );
  }
  if (!inp.deleting && failure.operation === 'create' && failure.kind === 'Permanent') {
    // A proxy that served keeps its slot (status.replacement stays): a bad image or machine
    // type then stops the rollout after --max-unavailable proxies instead of rolling through.
    const replacement = proxy.status?.replacement !== undefined;
    const reason = replacement ? 'ReplacementFailed' : 'ProvisioningFailed';
    const message = replacement
      ? `${failure.message}; this failed replacement holds one of provider ${failure.provider}'s --max-unavailable slots until its spec changes, its permanent-failure annotation is removed or it is deleted`
      : failure.message;
    return finish(proxy, {
      action: { type: 'none' },
      status: {
        phase: 'Failed',
        provisioned: { status: 'False', reason, message },
        healthy: AWAITING_PROBE,
      },
      events: [{ type: 'Warning', reason, message }],
      logs: [log],
      next: { kind: 'permanent', message: failure.message },
    });
  }
  const message = `provider ${failure.provider}: ${failure.operation} failed (${failure.kind}), retrying with backoff: ${failure.message}`;
  return keep(
    { status: 'False', reason: 'ProviderError', message },
    { kind: 'backoff' },
    { type: 'Warning', reason: 'ProviderError', message },
  );
}

/**
 * spec.provider names no configured provider: a configuration mistake, so nothing is lost.
 * A live proxy keeps its phase and is retried slowly (the providers file is read at start-up:
 * it heals after the fix and a restart). A Proxy being deleted keeps its finalizer while an
 * instance may exist, so the instance never leaks silently.
 */
export function unknownProviderStep(inp: {
  proxy: Proxy;
  verdict?: HealthVerdict;
  configured: readonly string[];
  deleting: boolean;
}): Step {
  const { proxy } = inp;
  const name = proxy.spec.provider ?? '';
  const configured = `configured: ${inp.configured.join(', ') || 'none'}`;
  const providerID = proxy.status?.providerID;
  const recorded = proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION];
  if (inp.deleting) {
    if (!providerID && recorded === undefined)
      return finish(proxy, { action: { type: 'release' }, next: { kind: 'steady' } });
    const what = providerID
      ? `instance ${providerID}`
      : `the instance it may have created (revision ${recorded})`;
    const message = `cannot delete ${what}: provider "${name}" is not configured (${configured}); the finalizer stays so the instance is not leaked — fix the providers config and restart the operator, or delete the instance yourself and remove the finalizer (README: Operations)`;
    return finish(proxy, {
      action: { type: 'none' },
      status: { phase: 'Deleting', provisioned: { status: 'False', reason: 'UnknownProvider', message } },
      events: [{ type: 'Warning', reason: 'UnknownProvider', message }],
      logs: [
        {
          level: 'error',
          message: 'cannot delete: provider not configured',
          fields: { provider: name, providerID },
        },
      ],
      next: { kind: 'requeue', seconds: CONFIG_RETRY_SECONDS },
    });
  }
  const h = healthOf(proxy, inp.verdict, true);
  const message = `provider "${name}" is not configured (${configured}); fix the providers config and restart the operator — retrying every ${CONFIG_RETRY_SECONDS} s`;
  return finish(proxy, {
    action: { type: 'none' },
    status: {
      phase: keptPhase(proxy, h),
      provisioned: { status: 'False', reason: 'UnknownProvider', message },
      healthy: h.condition,
      ...h.extra,
    },
    events: [{ type: 'Warning', reason: 'UnknownProvider', message }],
    logs: [{ level: 'error', message: 'provider not configured', fields: { provider: name } }],
    next: { kind: 'requeue', seconds: CONFIG_RETRY_SECONDS },
  });
}
