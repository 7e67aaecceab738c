import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { startDemoEnvironment, type DemoEnvironment } from '../../cmd/demo/environment.js';
import { runDemoFlow, type DemoSummary } from '../../cmd/demo/flow.js';

// The local demo's flow, non-interactively, on its own control plane: what `npm run demo`
// shows a newcomer must keep working.
const root = fileURLToPath(new URL('../..', import.meta.url));
let env: DemoEnvironment;
let summary: DemoSummary;
const printed: string[] = [];

beforeAll(async () => {
  env = await startDemoEnvironment({ root, logger: pino({ level: 'silent' }), progress: () => {} });
  summary = await runDemoFlow(env, (line) => printed.push(line), 'kubectl');
}, 240_000);

afterAll(async () => {
  await env?.close();
});

describe('the local demo, end to end', () => {
  it('brings a Managed and an External proxy to Ready and lists both as healthy', () => {
    expect(summary.ready).toEqual(['demo-managed', 'demo-external']);
    expect(summary.listed).toBe(2);
  });

  it('leases a proxy and really fetches a page through it', () => {
    expect(summary.leasedProxy).toMatch(/^default\/demo-/);
    expect(summary.fetchedStatus).toBe(200);
    expect(summary.fetchedBody).toMatch(/hello from the local target/);
  });

  it('skips a banned proxy for that target, then answers 409 all_cooling_down', () => {
    expect(summary.afterBanLeasedProxy).not.toBe(summary.leasedProxy);
    expect(summary.allCoolingDownStatus).toBe(409);
    expect(summary.allCoolingDownError).toBe('all_cooling_down');
  });

  it('releases idempotently (204 every time)', () => {
    expect(summary.releaseStatuses).toEqual([204, 204, 204]);
  });

  it('prints each step as the command a person would type', () => {
    const text = printed.join('\n');
    expect(text).toMatch(/\$ kubectl --kubeconfig \S+ get px -w/);
    expect(text).toMatch(/\$ curl -s -XPOST 'http:\/\/127\.0\.0\.1:\d+\/v1\/leases'/);
    expect(text).toMatch(/\$ curl -s -x http:\/\/127\.\d+\.\d+\.\d+:\d+ http:\/\/127\.0\.0\.1:\d+\//);
  });
});
