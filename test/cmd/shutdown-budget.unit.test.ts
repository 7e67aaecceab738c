import type { V1Deployment } from '@kubernetes/client-node';
import { OPERATOR_NAME, OPERATOR_NAMESPACE } from '../../charts/names.js';
import { TERMINATION_GRACE_SECONDS } from '../../charts/operator-chart.js';
import { SERVER_DEFAULTS } from '../../discovery/server.js';
import {
  DEFAULT_SHUTDOWN_GRACE_SECONDS,
  SHUTDOWN_BOUNDS,
  shutdownBudgetSeconds,
} from '../../framework/core/operator.js';
import { chartObjects, find } from '../charts/manifests.js';

// Issue 11 item 8: the kubelet SIGKILLs a Pod after terminationGracePeriodSeconds; the
// operator's graceful stop (drain, discovery close, cleanup, Lease release) must fit inside.
const deployment = find(
  chartObjects().get('operator')!,
  'Deployment',
  OPERATOR_NAME,
  OPERATOR_NAMESPACE,
) as unknown as V1Deployment;

describe("the Deployment's termination grace", () => {
  it('is what the chart declares', () => {
    expect(deployment.spec!.template.spec!.terminationGracePeriodSeconds).toBe(TERMINATION_GRACE_SECONDS);
  });

  it("exceeds the operator's longest graceful stop, with a margin for the process to exit", () => {
    // npm start leaves the handlers' grace at the framework default.
    const budget = shutdownBudgetSeconds(DEFAULT_SHUTDOWN_GRACE_SECONDS);
    expect(budget).toBe(
      DEFAULT_SHUTDOWN_GRACE_SECONDS +
        SHUTDOWN_BOUNDS.afterAbort +
        SHUTDOWN_BOUNDS.cleanup +
        SHUTDOWN_BOUNDS.informers +
        SHUTDOWN_BOUNDS.leaseRelease,
    );
    expect(TERMINATION_GRACE_SECONDS).toBeGreaterThanOrEqual(budget + 5);
  });

  it("fits the discovery API's close inside the drain it runs alongside", () => {
    expect(SERVER_DEFAULTS.shutdownGraceMs / 1000).toBeLessThanOrEqual(DEFAULT_SHUTDOWN_GRACE_SECONDS);
  });
});
