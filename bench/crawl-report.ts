// The bench:crawl report: a scenario's rounds as a table beside Crawlee's list, and the targets
// each round of the operator's side is checked against.
import type { CrawlFigures } from './crawl-scenario.js';
import { sharedWindow, type Timeline } from './shared-window.js';

export interface Row {
  figures: CrawlFigures;
  conflicts?: number;
  leasesLeft?: number;
  sessionsLeft?: number;
  cpuSeconds?: number;
  peakRssMiB?: number;
}

export interface Rounds {
  operator: Row;
  list: Row;
  operators: Row[];
  lists: Row[];
  /** The sides of each round crawled at once (--side-by-side). */
  sideBySide: boolean;
}

const timelineOf = (f: CrawlFigures): Timeline => ({
  startedAt: f.startedAt,
  durationMs: f.seconds * 1000,
  fetchedAt: f.fetchedAt,
});

/**
 * Of the tokens the site's buckets held or refilled from the crawl's first request to its last
 * page, the share spent on pages: how well a crawl used a rate-limited site whatever number of
 * pages it fetched (see site-budget.ts).
 */
const budgetShare = (f: CrawlFigures) =>
  f.budget === undefined ? 'n/a' : `${((100 * f.budget.used) / f.budget.total).toFixed(1)} %`;

const cpuShareText = (c: CrawlFigures['integrationCpu']) =>
  c === undefined
    ? 'n/a'
    : `${((100 * c.oursMs) / c.busyMs).toFixed(2)} % (${c.oursMs.toFixed(0)} of ${c.busyMs.toFixed(0)} ms)`;

const perPageText = (p: CrawlFigures['perPage']) =>
  `${p.minorFaults.toFixed(1)}, ${p.voluntarySwitches.toFixed(2)} / ${p.involuntarySwitches.toFixed(2)}, ` +
  `${p.gcMs.toFixed(3)} (${(1000 * p.gcs).toFixed(1)}, ${(1000 * p.majorGcs).toFixed(1)}), ${p.heapUsedMiB.toFixed(0)} MiB (${p.retainedMiB.toFixed(0)} MiB)`;

const perRoundCost = (p: CrawlFigures['perPage']) =>
  `${p.minorFaults.toFixed(1)} / ${p.voluntarySwitches.toFixed(2)}, ${p.retainedMiB.toFixed(0)} MiB`;

/** Every target but pages/s, for one round of the operator's side. */
function targetChecks({ figures: f, leasesLeft, sessionsLeft }: Row): [string, boolean][] {
  return [
    ['fetched >= 99.9 %', f.fetched / f.pages >= 0.999],
    ['banned-late 0', f.bannedLate === 0],
    ['dead after report <= in flight', f.attemptsAfterReport.every((a, i) => a <= f.inFlightAtReport[i]!)],
    ['0 leases/sessions left', leasesLeft === 0 && sessionsLeft === 0],
  ];
}

const metText = (met: boolean) => (met ? 'met' : 'NOT met');

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export function table(title: string, { operator, list, operators, lists, sideBySide }: Rounds): string {
  const o = operator.figures;
  const l = list.figures;
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const rows: [string, string, string][] = [
    [
      'pages fetched / P',
      `${o.fetched}/${o.pages} (${((100 * o.fetched) / o.pages).toFixed(2)} %)`,
      `${l.fetched}/${l.pages} (${((100 * l.fetched) / l.pages).toFixed(2)} %)`,
    ],
    ['failed requests', String(o.failedRequests), String(l.failedRequests)],
    ['requests Crawlee sent (retries included)', String(o.attempts), String(l.attempts)],
    ['pages/s', o.pagesPerSecond.toFixed(1), l.pagesPerSecond.toFixed(1)],
    [
      'CPU ms per page in the crawling process (Crawlee; site and proxies unless apart)',
      o.cpuMsPerPage.toFixed(2),
      l.cpuMsPerPage.toFixed(2),
    ],
    [
      "of it, the kernel's share",
      `${(100 * o.systemCpuShare).toFixed(1)} %`,
      `${(100 * l.systemCpuShare).toFixed(1)} %`,
    ],
    [
      'per page: minor faults, switches (voluntary / involuntary), GC ms (per 1,000 pages: collections, full ones), heap at the end (after a full GC)',
      perPageText(o.perPage),
      perPageText(l.perPage),
    ],
    [
      'CPU ms of the crawling process by its 100th / 1,000th page, per round',
      operators.map((r) => cpuByPageText(r.figures)).join('; '),
      lists.map((r) => cpuByPageText(r.figures)).join('; '),
    ],
    ...(o.worldCpuMsPerPage === undefined
      ? []
      : [
          [
            'CPU ms per page in the fleet and site, apart',
            o.worldCpuMsPerPage.toFixed(2),
            l.worldCpuMsPerPage?.toFixed(2) ?? 'n/a',
          ] as [string, string, string],
        ]),
    [
      '403s from the site (the first through each banned proxy finds the ban)',
      String(o.refused),
      String(l.refused),
    ],
    ['requests via a banned proxy > 2 s after its first 403', String(o.bannedLate), String(l.bannedLate)],
    [
      'attempts via each dead proxy after its death',
      JSON.stringify(o.attemptsAfterDeath),
      JSON.stringify(l.attemptsAfterDeath),
    ],
    [
      'attempts via each dead proxy after its first report (in flight then)',
      `${JSON.stringify(o.attemptsAfterReport)} (${JSON.stringify(o.inFlightAtReport)})`,
      'n/a (no reports)',
    ],
    ['429s from the site', String(o.rateLimited), String(l.rateLimited)],
    ["share of the site's rate-limit budget used by the last page", budgetShare(o), budgetShare(l)],
    [
      "Crawlee's pool: median tasks running / desired at the end",
      `${o.concurrency.medianRunning} / ${o.concurrency.desiredAtEnd}`,
      `${l.concurrency.medianRunning} / ${l.concurrency.desiredAtEnd}`,
    ],
    ...(o.integrationCpu === undefined
      ? []
      : [
          [
            "the integration's share of the crawling process's busy CPU",
            cpuShareText(o.integrationCpu),
            cpuShareText(l.integrationCpu),
          ] as [string, string, string],
        ]),
    ['409s from discovery', String(operator.conflicts ?? 0), 'n/a'],
    ['leases / sessions left after close()', `${operator.leasesLeft} / ${operator.sessionsLeft}`, 'n/a'],
    ['operator CPU seconds during the crawl', (operator.cpuSeconds ?? 0).toFixed(2), 'n/a'],
    ['operator peak RSS', `${(operator.peakRssMiB ?? 0).toFixed(0)} MiB`, 'n/a'],
  ];
  const opRates = operators.map((r) => r.figures.pagesPerSecond);
  const listRates = lists.map((r) => r.figures.pagesPerSecond);
  const ratio = median(opRates) / median(listRates);
  // Rounds run side by side (see scenario()): each round's own ratio leaves out how fast the
  // machine was in that round, which moves both sides alike.
  const roundRatios = operators.map(
    (r, i) => r.figures.pagesPerSecond / (lists[i]?.figures.pagesPerSecond ?? NaN),
  );
  const cpuRatios = operators.map((r, i) => (lists[i]?.figures.cpuMsPerPage ?? NaN) / r.figures.cpuMsPerPage);
  // A site's buckets start full: the first pages of any crawl come at a burst, so a crawl that
  // gives up on pages is shorter and gets a larger share of its pages from the burst. Over the
  // same first K pages both sides had the same burst to spend.
  const sameK = operators.map((r, i) => Math.min(r.figures.fetched, lists[i]?.figures.fetched ?? 0));
  const rateAt = (r: Row, k: number) => (k === 0 ? 0 : k / (r.figures.fetchedAt[k - 1]! / 1000));
  const opSame = operators.map((r, i) => rateAt(r, sameK[i]!));
  const listSame = lists.map((r, i) => rateAt(r, sameK[i] ?? 0));
  const sameRatio = median(opSame) / median(listSame);
  // Side by side, the rounds' pages/s above include the stretch one side crawled alone.
  const windows = sideBySide
    ? operators.map((r, i) => sharedWindow(timelineOf(r.figures), timelineOf(lists[i]!.figures)))
    : [];
  const windowRatio = median(windows.map((w) => w.ratio));
  const verdict = sideBySide ? windowRatio : ratio;
  const width = Math.max(...rows.map((r) => r[0].length));
  return [
    `${title}`,
    `  ${'figure'.padEnd(width)} | operator | Crawlee proxyUrls (baseline)`,
    ...rows.map(([name, a, b]) => `  ${name.padEnd(width)} | ${a} | ${b}`),
    `  pages/s per round: operator ${opRates.map((r) => r.toFixed(1)).join(', ')}; baseline ${listRates.map((r) => r.toFixed(1)).join(', ')} (ratio ${ratio.toFixed(3)}x)`,
    `  pages/s ratio operator / baseline (medians): ${ratio.toFixed(2)}x; total dead-proxy attempts ${sum(o.attemptsAfterDeath)} vs ${sum(l.attemptsAfterDeath)}`,
    `  per round, operator / baseline: pages/s ${roundRatios.map((r) => r.toFixed(3)).join(', ')} (median ${median(roundRatios).toFixed(3)}x); pages per CPU second ${cpuRatios.map((r) => r.toFixed(3)).join(', ')} (median ${median(cpuRatios).toFixed(3)}x)`,
    `  pages/s over the first K pages both fetched (K per round ${sameK.join(', ')}): operator ${opSame.map((r) => r.toFixed(1)).join(', ')}; baseline ${listSame.map((r) => r.toFixed(1)).join(', ')}; ratio ${sameRatio.toFixed(3)}x`,
    ...(sideBySide
      ? [
          `  side by side on one core, pages/s while both crawled (window s): operator ${windows.map((w) => w.a.toFixed(1)).join(', ')}; baseline ${windows.map((w) => w.b.toFixed(1)).join(', ')} (${windows.map((w) => (w.ms / 1000).toFixed(1)).join(', ')})`,
          `  side by side, operator / baseline per round: ${windows.map((w) => w.ratio.toFixed(3)).join(', ')} (median ${windowRatio.toFixed(3)}x)`,
        ]
      : []),
    ...(o.budget === undefined
      ? []
      : [
          `  share of the site's budget used per round: operator ${operators.map((r) => budgetShare(r.figures)).join(', ')}; baseline ${lists.map((r) => budgetShare(r.figures)).join(', ')}`,
        ]),
    ...(o.integrationCpu === undefined
      ? []
      : [
          `  the integration's share of the crawling process's busy CPU per round: operator ${operators.map((r) => cpuShareText(r.figures.integrationCpu)).join(', ')}; baseline ${lists.map((r) => cpuShareText(r.figures.integrationCpu)).join(', ')}`,
        ]),
    `  per round, minor faults / voluntary switches per page, heap after a full GC: operator ${operators.map((r) => perRoundCost(r.figures.perPage)).join('; ')}; baseline ${lists.map((r) => perRoundCost(r.figures.perPage)).join('; ')}`,
    `  targets per round (every page, no banned-late request, none after a report, nothing left): operator ${operators.map((r) => metText(targetChecks(r).every(([, met]) => met))).join(', ')}`,
    `  integration: ${JSON.stringify(o.integration)}`,
    ...[...operators, ...lists]
      .filter((r) => r.figures.perSecond !== undefined)
      .map((r) => `  per second (200s/429s/sources), ${r.figures.mode}: ${r.figures.perSecond}`),
    `  targets: ${targetChecks(operator)
      .map(([name, met]) => `${name} ${metText(met)}; `)
      .join('')}` +
      `pages/s >= 1.0x (${sideBySide ? 'side by side, median of the rounds' : 'medians of the rounds'}) ${metText(verdict >= 1)}`,
  ].join('\n');
}

function cpuByPageText({ cpuMsByPage }: CrawlFigures): string {
  return [cpuMsByPage[100], cpuMsByPage[1000]]
    .map((ms) => (ms === undefined ? '-' : ms.toFixed(0)))
    .join(' / ');
}
