import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { parseAllDocuments } from 'yaml';
import { proxyCrd } from '../../crds/proxy-crd.js';
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

  it("shows each proxy's exit IP (the local echo saw it through the proxy) in `get px -o wide`", () => {
    expect(Object.keys(summary.exitIPs)).toEqual(['demo-managed', 'demo-external']);
    for (const ip of Object.values(summary.exitIPs)) expect(ip).toMatch(/^127\.\d+\.\d+\.\d+$/);
    const at = printed.findIndex((l) => / get px -o wide$/.test(l));
    expect(printed[at + 1].split(/\s+/)).toContain('EXIT-IP');
    for (const [name, ip] of Object.entries(summary.exitIPs)) {
      expect(printed.slice(at + 2, at + 4).find((l) => l.startsWith(`${name} `))).toContain(` ${ip} `);
    }
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

  // The API answers 404 lease_not_found to a lease already ended (docs/api.md, since the
  // tenants merge); the demo releases its first lease twice to show it.
  it('releases: 204, and 404 for the lease it already released', () => {
    expect(summary.releaseStatuses).toEqual([204, 404, 204]);
    // Step 8: a page through the gateway, out of one of the proxies' exit IPs.
    expect(summary.gatewayStatus).toBe(200);
    expect(Object.values(summary.exitIPs)).toContain(summary.gatewayBody.trim());
  });

  it('prints each step as the command a person would type', () => {
    const text = printed.join('\n');
    expect(text).toMatch(/\$ kubectl --kubeconfig \S+ get px -w/);
    expect(text).toMatch(/\$ curl -s -XPOST 'http:\/\/127\.0\.0\.1:\d+\/v1\/leases'/);
    // The lease's URL, with the proxy's credentials as userinfo when it has some (the Managed
    // one always does: its mock proxy answers 407 without them).
    expect(text).toMatch(
      /\$ curl -s --noproxy '' -x 'http:\/\/(?:[^:@' ]+:[^@' ]+@)?127\.\d+\.\d+\.\d+:\d+' http:\/\/127\.0\.0\.1:\d+\//,
    );
  });

  // Issue 12 item 9: what the demo prints can be pasted and matches what kubectl shows.
  it('prints the manifests it applies as a heredoc kubectl can take', () => {
    const apply = printed.find((l) => l.startsWith('$ kubectl --kubeconfig '))!;
    const m = /^\$ kubectl --kubeconfig \S+ apply -f - <<'EOF'\n([\s\S]*)\nEOF$/.exec(apply);
    expect(m).not.toBeNull();
    const docs = parseAllDocuments(m![1]).map(
      (d) => d.toJS() as { kind: string; metadata: { name: string }; spec: { mode: string } },
    );
    expect(docs.map((d) => [d.kind, d.metadata.name, d.spec.mode])).toEqual([
      ['Proxy', 'demo-managed', 'Managed'],
      ['Proxy', 'demo-external', 'External'],
    ]);
  });

  it("prints `kubectl get px -w` with the CRD's printer columns and a Ready, healthy row per proxy", () => {
    const columns = proxyCrd.spec.versions[0]
      .additionalPrinterColumns!.filter((c) => !c.priority)
      .map((c) => c.name.toUpperCase());
    const at = printed.findIndex((l) => / get px -w$/.test(l));
    expect(printed[at + 1].split(/\s+/)).toEqual(['NAME', ...columns]);
    for (const [name, mode, provider] of [
      ['demo-managed', 'Managed', 'mock'],
      ['demo-external', 'External', ''],
    ]) {
      const ready = printed.find((l) => l.startsWith(`${name} `) && / Ready /.test(l));
      expect(ready?.split(/\s{3,}/).slice(0, provider ? 3 : 2)).toEqual(
        provider ? [name, mode, provider] : [name, mode],
      );
      expect(ready).toMatch(/ Ready {3,}127\.0\.0\.\d+ {3,}True {3,}\d+[smhd]\S*$/);
    }
  });

  it('prints every API answer the same way: the body curl shows, then the status its -w prints', () => {
    const curls = printed.filter((l) => l.startsWith('$ curl '));
    expect(curls.length).toBeGreaterThanOrEqual(9);
    for (const c of curls) expect(c.endsWith(` -w '\\nHTTP %{http_code}\\n'`)).toBe(true);
    const statuses = printed.filter((l) => /^HTTP \d{3}$/.test(l));
    expect(statuses).toHaveLength(curls.length);
    expect(printed.filter((l) => /^\{/.test(l)).every((l) => JSON.parse(l) !== undefined)).toBe(true);
  });

  // Issue 20 item 8: the Crawlee recipe of docs/crawling.md (linked from the README), pasted unchanged, crawls every page of the
  // demo's site through the demo's proxies (its defaults point at the demo; the test's demo
  // may sit on other ports, which the recipe's two environment variables carry).
  it("runs the docs' Crawlee recipe unchanged: every page of the demo site, no lease left", async () => {
    const run = promisify(execFile);
    const readme = readFileSync(join(root, 'docs/crawling.md'), 'utf8');
    const block = /<!-- checked: crawlee\b[^>]*-->\n```ts\n([\s\S]*?)\n```/.exec(readme);
    expect(block).not.toBeNull();
    // The client as a workspace consumer imports it: built, by package name.
    await run(process.execPath, [
      join(root, 'node_modules/typescript/bin/tsc'),
      '-p',
      join(root, 'client/tsconfig.json'),
    ]);
    await mkdir(join(root, 'build'), { recursive: true });
    const script = join(root, 'build', 'readme-crawlee.mjs');
    await writeFile(script, block![1]);
    const storage = await mkdtemp(join(tmpdir(), 'readme-crawlee-'));
    try {
      const { stdout } = await run(process.execPath, [script], {
        cwd: storage,
        env: {
          ...process.env,
          DISCOVERY_URL: env.discoveryURL,
          START_URL: env.site.url,
          CRAWLEE_STORAGE_DIR: storage,
        },
        timeout: 120_000,
      });
      const fetched = new Set(stdout.split('\n').filter((l) => l.startsWith('fetched ')));
      expect([...fetched].sort()).toEqual(
        [
          env.site.url,
          ...Array.from({ length: env.site.pages - 1 }, (_, i) => `${env.site.url}page/${i + 1}`),
        ]
          .map((u) => `fetched ${u}`)
          .sort(),
      );
    } finally {
      await rm(storage, { recursive: true, force: true });
    }
    // The gateway's lease of step 8 waits its idle time (2 s in the demo) before release.
    let leases: number[] = [];
    for (let i = 0; i < 50; i++) {
      const proxies = (await (await fetch(`${env.discoveryURL}/v1/proxies`)).json()) as {
        items: { activeLeases: number }[];
      };
      leases = proxies.items.map((p) => p.activeLeases);
      if (leases.every((n) => n === 0)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(leases).toEqual(leases.map(() => 0));
  }, 180_000);
});
