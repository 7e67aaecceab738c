import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import {
  DASHBOARD_FILE,
  KUSTOMIZATION_FILE,
  MONITORING_CHART,
  MONITORING_DIR,
  RULES_FILE,
  synthesize,
} from '../../charts/app.js';
import {
  alertGroups,
  DEFAULT_RUNBOOK_BASE_URL,
  runbookAnchor,
  runbookBaseURL,
} from '../../charts/monitoring/alert-rules.js';
import {
  DATASOURCE_VARIABLE,
  dashboardQueries,
  grafanaDashboard,
} from '../../charts/monitoring/grafana-dashboard.js';
import { METRICS_COMPONENT_LABELS, METRICS_SERVICE_NAME, OPERATOR_NAMESPACE } from '../../charts/names.js';
import { distObjects, find } from '../charts/manifests.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MONITORING = join(ROOT, 'dist', MONITORING_DIR);
const PROMTOOL_TESTS = join(ROOT, 'test/monitoring/alerts.promtool.yaml');
const ALERTS = alertGroups().flatMap((g) => g.rules);

/** promtool from PATH (Debian's prometheus package; .ci/run installs it). */
async function promtool(...args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await run('promtool', args, { cwd: ROOT });
    return stdout + stderr;
  } catch (err) {
    const e = err as { code?: string; stdout?: string; stderr?: string };
    if (e.code === 'ENOENT')
      throw new Error('promtool not found: apt-get install -y prometheus (.ci/run does)', { cause: err });
    throw new Error(`promtool ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`, { cause: err });
  }
}

interface PromtoolTests {
  tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts: unknown[] }> }>;
}

describe('the alert rules, checked and unit-tested by promtool', () => {
  it(`promtool check rules dist/${MONITORING_DIR}/${RULES_FILE}`, async () => {
    expect(await promtool('check', 'rules', join(MONITORING, RULES_FILE))).toContain(
      `SUCCESS: ${ALERTS.length} rules found`,
    );
  });

  it('promtool test rules: every case of test/monitoring/alerts.promtool.yaml passes', async () => {
    expect(await promtool('test', 'rules', PROMTOOL_TESTS)).toContain('SUCCESS');
  });

  it.each(ALERTS.map((a) => a.alert))('%s is tested both firing and not firing', async (alert) => {
    const file = parse(await readFile(PROMTOOL_TESTS, 'utf8')) as PromtoolTests;
    const cases = file.tests.flatMap((t) => t.alert_rule_test ?? []).filter((c) => c.alertname === alert);
    expect(cases.some((c) => c.exp_alerts.length > 0)).toBe(true);
    expect(cases.some((c) => c.exp_alerts.length === 0)).toBe(true);
  });
});

describe('each alert follows the kube-prometheus conventions', () => {
  const runbooks = readFile(join(ROOT, 'docs/runbooks.md'), 'utf8');
  const headings = async () =>
    (await runbooks)
      .split('\n')
      .filter((l) => l.startsWith('## '))
      .map((l) => l.slice(3).trim());

  it.each(ALERTS.map((a) => [a.alert, a] as const))('%s: severity, summary, description', (_name, a) => {
    expect(['critical', 'warning', 'info']).toContain(a.severity);
    expect(a.summary).toMatch(/\.$/);
    expect(a.description.length).toBeGreaterThan(a.summary.length);
  });

  it('every alert has its runbook section in docs/runbooks.md, and every section an alert', async () => {
    const names = ALERTS.map((a) => a.alert);
    expect((await headings()).sort()).toEqual([...names].sort());
    // GitHub's anchor of "## ProxyPoolNoHealthyProxies" is #proxypoolnohealthyproxies.
    for (const a of names) expect(runbookAnchor(a)).toBe(a.toLowerCase());
  });

  it('names only metrics the code exports', async () => {
    const sources = await sourceText([
      'health',
      'book',
      'discovery',
      'gateway',
      'handlers',
      'framework',
      'providers',
    ]);
    const exprs = [...ALERTS.map((a) => a.expr), ...dashboardQueries()];
    const names = new Set(
      exprs.flatMap((e) => e.match(/\b(?:proxy_operator|operator_framework)_\w+/g) ?? []),
    );
    const missing = [...names]
      .map((n) => n.replace(/_(bucket|count|sum)$/, ''))
      .filter((n) => !sources.includes(`'${n}'`));
    expect(missing).toEqual([]);
    expect(names.size).toBeGreaterThan(10);
  });
});

describe('RUNBOOK_BASE_URL (runbookBaseURL): an address an on-call engineer can open, or the repository path', () => {
  it.each<[string, string | undefined, string | RegExp]>([
    ['absent: the path of the page in the repository', undefined, 'docs/runbooks.md'],
    ['empty: the same', '  ', 'docs/runbooks.md'],
    [
      'an https address of the page: as given, without a trailing slash',
      'https://git.corp.test/sre/proxy-operator/-/blob/main/docs/runbooks.md/',
      'https://git.corp.test/sre/proxy-operator/-/blob/main/docs/runbooks.md',
    ],
    [
      'the old placeholder',
      'https://github.com/CHANGEME/proxy-operator/blob/main/docs/runbooks.md',
      /RUNBOOK_BASE_URL is a placeholder/,
    ],
    ['a placeholder domain', 'https://docs.example.com/runbooks.md', /RUNBOOK_BASE_URL is a placeholder/],
    ['not a URL', 'docs/runbooks.md', /RUNBOOK_BASE_URL must be an absolute http\(s\) URL/],
    ['another scheme', 'ftp://files.corp.test/runbooks.md', /RUNBOOK_BASE_URL must be an http\(s\) URL/],
    ['with a fragment', 'https://wiki.corp.test/runbooks#top', /RUNBOOK_BASE_URL must not carry a fragment/],
  ])('%s', (_name, raw, expected) => {
    if (typeof expected === 'string') expect(runbookBaseURL(raw)).toBe(expected);
    else expect(() => runbookBaseURL(raw)).toThrow(expected);
  });

  it('a synth with a placeholder stops before writing anything, naming the setting', async () => {
    const out = await mkdtemp(join(tmpdir(), 'proxy-operator-runbooks-'));
    try {
      expect(() =>
        synthesize(out, { runbookBaseURL: 'https://github.com/CHANGEME/x/blob/main/docs/runbooks.md' }),
      ).toThrow(/RUNBOOK_BASE_URL/);
      expect(await readdir(out)).toEqual([]);
      synthesize(out, { runbookBaseURL: 'https://git.corp.test/sre/docs/runbooks.md' });
      const rules = await readFile(join(out, MONITORING_DIR, RULES_FILE), 'utf8');
      expect(rules).toContain('runbook_url: https://git.corp.test/sre/docs/runbooks.md#proxyleasestoredown');
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  it('no rule shipped in dist/ carries a placeholder (CHANGEME)', async () => {
    for (const file of [RULES_FILE, `${MONITORING_CHART}.yaml`]) {
      const text = await readFile(join(MONITORING, file), 'utf8');
      expect({ file, placeholder: /changeme/i.test(text) }).toEqual({ file, placeholder: false });
      expect(text).toContain(`runbook_url: ${DEFAULT_RUNBOOK_BASE_URL}#proxyleasestoredown`);
    }
  });
});

describe(`dist/${MONITORING_DIR}/`, () => {
  let fresh: string;
  beforeAll(async () => {
    fresh = await mkdtemp(join(tmpdir(), 'proxy-operator-monitoring-'));
    synthesize(fresh);
  });
  afterAll(() => rm(fresh, { recursive: true, force: true }));

  it('matches what the charts synthesize now (run `npm run synth` and commit dist/)', async () => {
    const want = (await readdir(join(fresh, MONITORING_DIR))).sort();
    expect((await readdir(MONITORING)).sort()).toEqual(want);
    for (const file of want) {
      expect({ file, text: await readFile(join(MONITORING, file), 'utf8') }).toEqual({
        file,
        text: await readFile(join(fresh, MONITORING_DIR, file), 'utf8'),
      });
    }
  });

  it('stays out of dist/kustomization.yaml: `kubectl apply -k dist/` works without the Prometheus Operator', async () => {
    const kustomization = parse(await readFile(join(ROOT, 'dist', KUSTOMIZATION_FILE), 'utf8')) as {
      resources: string[];
    };
    expect(kustomization.resources.some((r) => r.includes(MONITORING_DIR))).toBe(false);
  });

  it('the PrometheusRule carries the same groups as the rules file, runbook links included', async () => {
    const objects = await distObjects(`${MONITORING_DIR}/${MONITORING_CHART}.yaml`);
    const rule = find(objects, 'PrometheusRule', 'proxy-operator', OPERATOR_NAMESPACE);
    const file = parse(await readFile(join(MONITORING, RULES_FILE), 'utf8')) as { groups: unknown };
    expect((rule.spec as { groups: unknown }).groups).toEqual(file.groups);
    const links = ALERTS.map((a) => `${DEFAULT_RUNBOOK_BASE_URL}#${runbookAnchor(a.alert)}`);
    expect(JSON.stringify(file.groups)).toEqual(expect.stringContaining(links[0]!));
    for (const link of links) expect(JSON.stringify(file.groups)).toContain(link);
  });

  it('the ServiceMonitor selects the metrics Service (not the discovery one) by its port name', async () => {
    const monitor = find(
      await distObjects(`${MONITORING_DIR}/${MONITORING_CHART}.yaml`),
      'ServiceMonitor',
      'proxy-operator',
    );
    const service = find(await distObjects('operator.yaml'), 'Service', METRICS_SERVICE_NAME);
    const spec = monitor.spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: Array<{ port: string }>;
    };
    expect(service.metadata.labels).toMatchObject(spec.selector.matchLabels);
    expect(spec.selector.matchLabels).toMatchObject(METRICS_COMPONENT_LABELS);
    const discovery = find(await distObjects('operator.yaml'), 'Service', 'proxy-operator-discovery');
    expect(discovery.metadata.labels).not.toMatchObject(spec.selector.matchLabels);
    const ports = (service.spec as { ports: Array<{ name: string }> }).ports.map((p) => p.name);
    expect(ports).toContain(spec.endpoints[0]!.port);
  });

  it(`the dashboard reads every panel from the \${${DATASOURCE_VARIABLE}} variable, also as a Grafana sidecar ConfigMap`, async () => {
    const dashboard = JSON.parse(await readFile(join(MONITORING, DASHBOARD_FILE), 'utf8')) as ReturnType<
      typeof grafanaDashboard
    > & {
      templating: { list: Array<{ name: string; type: string }> };
      panels: Array<Record<string, unknown>>;
    };
    expect(dashboard.templating.list).toContainEqual(
      expect.objectContaining({ name: DATASOURCE_VARIABLE, type: 'datasource' }),
    );
    const panels = dashboard.panels.filter((p) => p.type !== 'row');
    expect(panels.length).toBeGreaterThan(10);
    for (const p of panels)
      expect(p.datasource).toEqual({ type: 'prometheus', uid: `\${${DATASOURCE_VARIABLE}}` });
    const configMap = find(
      await distObjects(`${MONITORING_DIR}/${MONITORING_CHART}.yaml`),
      'ConfigMap',
      'proxy-operator-dashboard',
    );
    expect(configMap.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
    expect(JSON.parse(Object.values(configMap.data as Record<string, string>)[0]!)).toEqual(dashboard);
  });
});

async function sourceText(dirs: string[]): Promise<string> {
  const texts: string[] = [];
  for (const dir of dirs) {
    for (const entry of await readdir(join(ROOT, dir), { recursive: true })) {
      if (entry.endsWith('.ts')) texts.push(await readFile(join(ROOT, dir, entry), 'utf8'));
    }
  }
  return texts.join('\n');
}
