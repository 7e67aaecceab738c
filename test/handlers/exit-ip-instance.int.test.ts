import type { Proxy } from '../../crds/proxy-types.js';
import { eventsOnceThere, eventually, managedSpec, operatorSuite, readyProxy } from './operator-fixture.js';

// Issue 44 item 4 through the reconcile path, on a real API server with the mock provider's
// real forward proxies (each connects out from its own loopback address, so its exit IP is its
// own): the exit IP follows the instance. A replacement clears status.exitIP in the same write
// that records the new instance; it is read again through the new one.

const suite = operatorSuite('exitip-instance', {
  settings: { exitIPRefreshMillis: 500, driftCheckSeconds: 1 },
});
const { api, kc, namespace } = suite;

it('a replaced Managed proxy never shows its old exit IP on its new instance', async () => {
  const base = managedSpec(suite.target);
  await api.create('moves', {
    spec: { ...base, healthCheck: { ...base.healthCheck, exitIPURL: suite.target.exitIPURL } },
  });
  const first = await eventually('Ready with its exit IP', async () => {
    const p = await readyProxy(api, 'moves');
    return p?.status?.exitIP !== undefined ? p : undefined;
  });
  const old = { providerID: first.status!.providerID!, ip: first.status!.ip!, exitIP: first.status!.exitIP! };
  expect(old.exitIP).toBe(old.ip);

  // Watch every status the API server holds while the proxy is replaced.
  const seen: Proxy[] = [];
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      seen.push(await api.get('moves'));
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  await api.patchSpec('moves', { placement: { ...base.placement, zone: 'local-b' } });
  const after = await eventually(
    'Ready on a new instance with its own exit IP',
    async () => {
      const p = await readyProxy(api, 'moves');
      return p && p.status?.providerID !== old.providerID && p.status?.exitIP === p.status?.ip
        ? p
        : undefined;
    },
    60_000,
  );
  watching = false;
  await watcher;
  expect(after.status?.ip).not.toBe(old.ip);
  for (const p of seen) {
    // Whatever serves the proxy, the exit IP shown is that instance's or none.
    if (p.status?.providerID !== old.providerID || p.status?.ip !== old.ip)
      expect(p.status?.exitIP === undefined || p.status.exitIP === p.status.ip).toBe(true);
  }
  expect(seen.some((p) => p.status?.exitIP === undefined)).toBe(true);
  await eventsOnceThere(kc, namespace, 'moves', 'ExitIPCleared');
});
