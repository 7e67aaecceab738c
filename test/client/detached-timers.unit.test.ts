// The integration's timer scope (an AsyncResource: its timers keep the context the integration
// was made in, not a request's) ends when the integration closes. Until it is destroyed
// async_hooks counts it as live, and jest --detectOpenHandles, the tool for finding the suites
// that keep a run alive, reported every closed SessionLeases as an open handle.
import { createHook } from 'node:async_hooks';
import { DiscoveryClient } from '../../client/src/index.js';
import { SessionLeases } from '../../client/src/crawlee/session-leases.js';

const SCOPE = 'ProxyOperatorTimers';

/** The async ids of the timer scopes made while `run` runs, and those destroyed by its end. */
async function scopes(run: () => Promise<void>): Promise<{ made: number[]; destroyed: number[] }> {
  const made: number[] = [];
  const destroyed: number[] = [];
  const hook = createHook({
    init: (id, type) => void (type === SCOPE && made.push(id)),
    destroy: (id) => void (made.includes(id) && destroyed.push(id)),
  }).enable();
  try {
    await run();
    // async_hooks emits destroy asynchronously: a few turns of the loop.
    for (let i = 0; i < 20 && destroyed.length < made.length; i++)
      await new Promise((resolve) => setImmediate(resolve));
  } finally {
    hook.disable();
  }
  return { made, destroyed };
}

const client = () => new DiscoveryClient({ baseUrl: 'http://127.0.0.1:9' });

describe('the integration timer scope', () => {
  it.each([
    ['closed once', 1],
    ['closed twice (close is idempotent)', 2],
  ])('ends when SessionLeases is %s', async (_, closes) => {
    const { made, destroyed } = await scopes(async () => {
      const leases = new SessionLeases({ client: client() });
      for (let i = 0; i < closes; i++) await leases.close();
    });
    expect(made).toHaveLength(1);
    expect(destroyed).toEqual(made);
  });

  it('stays while SessionLeases is open (its renewals and ok batches still run in it)', async () => {
    let leases: SessionLeases | undefined;
    const { made, destroyed } = await scopes(async () => {
      leases = new SessionLeases({ client: client() });
    });
    expect(made).toHaveLength(1);
    expect(destroyed).toEqual([]);
    await leases!.close();
  });
});
