import type { V1Deployment } from '@kubernetes/client-node';
import { OPERATOR_NAME, OPERATOR_NAMESPACE } from '../../charts/names.js';
import { TERMINATION_GRACE_SECONDS } from '../../charts/operator-chart.js';
import { SERVER_DEFAULTS } from '../../discovery/server.js';
import { pino } from 'pino';
import {
  DEFAULT_SHUTDOWN_GRACE_SECONDS,
  shutdownBudgetSeconds,
  stopInOrder,
  type ShutdownParts,
} from '../../framework/core/shutdown.js';
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

  it.each([DEFAULT_SHUTDOWN_GRACE_SECONDS, 0, 7])(
    'is what a stop with every part hung waits in all (grace %i s): shutdownBudgetSeconds() counts every bounded step',
    async (grace) => {
      // Every part never finishes; the wait records what each bounded step would wait and
      // returns at once, so the sum is the real sequence's worst case, not the formula's.
      const never = () => new Promise<never>(() => {});
      const parts: ShutdownParts = {
        drainAndStopDaemons: never,
        abortHandlers: () => {},
        cleanup: never,
        stopInformers: never,
        releaseLease: never,
        closeProbe: async () => {},
      };
      let waitedMs = 0;
      const wait = async (ms: number) => void (waitedMs += ms);
      await stopInOrder(parts, grace, pino({ level: 'silent' }), wait);
      expect(waitedMs / 1000).toBe(shutdownBudgetSeconds(grace));
    },
  );

  it("exceeds the operator's longest graceful stop, with a margin for the process to exit", () => {
    // npm start leaves the handlers' grace at the framework default.
    expect(TERMINATION_GRACE_SECONDS).toBeGreaterThanOrEqual(
      shutdownBudgetSeconds(DEFAULT_SHUTDOWN_GRACE_SECONDS) + 5,
    );
  });

  it("fits the discovery API's close inside the drain it runs alongside", () => {
    expect(SERVER_DEFAULTS.shutdownGraceMs / 1000).toBeLessThanOrEqual(DEFAULT_SHUTDOWN_GRACE_SECONDS);
  });
});
