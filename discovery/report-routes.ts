// POST /v1/leases/{id}/report and POST /v1/reports: what a crawler saw through a lease's
// proxy, recorded in one atomic step of the book within the token's report and cooldown
// quotas, counted (the cooldowns by target: door "api") and logged.
import type { Express, Response } from 'express';
import { CooldownQuotaRefusal, type ReportOutcome, type ReportResult } from '../book/lease-store.js';
import { errorBody, sendJSON, type ApiErrorBody } from './api-error.js';
import type { ApiContext } from './api-context.js';
import {
  MAX_BATCH_REPORTS,
  parseReportBody,
  parseReportsBody,
  parseRequestID,
  REQUEST_ID_HEADER,
  type BatchedReport,
} from './request-parsing.js';
import { leaseNotFound, leaseNotFoundBody, methodNotAllowed } from './route-helpers.js';
import { RateLimiter } from './token-bucket.js';

export function mountReportRoutes(app: Express, ctx: ApiContext): void {
  const { leases, metrics, cooldowns, ledger, quotas, tokens, reportLog, guard, body, owner, quotaRefusal } =
    ctx;
  // A batch's items count one each; its burst fits the largest batch.
  const reportRate = new RateLimiter({
    ratePerSecond: quotas.reportsPerSecond,
    burst: Math.max(MAX_BATCH_REPORTS, Math.ceil(quotas.reportsPerSecond)),
  });

  /**
   * Records reports (and the releases they ask for) in one atomic step of the store: all of
   * them, or (a quota refusal, the store failing) none. Each answer is the report's view, or
   * undefined when its lease is gone (nothing to record); a refusal names the first report a
   * banned/rate_limited would push past the token's cooldown quota.
   */
  const recordReports = async (
    reports: readonly BatchedReport[],
    who: string,
    requestID: string | undefined,
  ): Promise<{ views: (ReportView | undefined)[] } | { refused: number; error: ApiErrorBody }> => {
    // An API without tokens has one tenant: nobody to agree with, so its reports are trusted.
    const rotationTrusted = tokens === undefined || tokens.policyOf(who).rotationTrusted;
    // The cooldown quota is judged by the book, before it records anything of the batch: one
    // count for every replica and both doors.
    const cooldownQuota = quotas.cooldowns;
    let outcomes: (ReportOutcome | undefined)[];
    try {
      outcomes = await leases.reportMany(
        reports.map(({ leaseID, result, release, ...details }) => ({
          leaseID,
          result,
          details: { ...details, rotationTrusted, cooldownQuota },
          ...(release === true ? { release } : {}),
        })),
        who,
        requestID,
      );
    } catch (err) {
      if (!(err instanceof CooldownQuotaRefusal)) throw err;
      return {
        refused: err.index,
        error: errorBody(
          'cooldown_quota',
          `token '${who}' keeps ${quotas.cooldowns} cooldowns running (its quota); nothing was recorded: a new one is accepted once one of its own ends`,
        ),
      };
    }
    return { views: outcomes.map((outcome, i) => reportView(reports[i], outcome, who)) };
  };

  /** A recorded report's answer, and what this replica counts and logs of it. */
  const reportView = (
    { result, release }: BatchedReport,
    outcome: ReportOutcome | undefined,
    who: string,
  ): ReportView | undefined => {
    if (outcome === undefined) return undefined;
    if (outcome.cooldownUntil !== undefined)
      ledger.cooldownRecorded(
        who,
        outcome.lease.proxyID,
        outcome.target ?? '',
        outcome.cooldownUntil.getTime(),
      );
    const view: ReportView = {
      leaseID: outcome.lease.id,
      proxyID: outcome.lease.proxyID,
      result,
      target: outcome.target ?? null,
      cooldownUntil: outcome.cooldownUntil?.toISOString() ?? null,
      ...(result === 'unreachable' ? { suspect: outcome.suspect ?? false } : {}),
      // The target was not recorded: every cooldown at the book's cap still runs.
      ...(outcome.capped === true ? { capped: true } : {}),
      ...(release === true ? { released: true } : {}),
    };
    // A repeat of a request id recorded nothing: counted and logged once, at the first.
    if (outcome.replayed === true) return view;
    metrics.countReport(result);
    // Debug lines and a periodic info summary: a client's reports never grow the log unboundedly.
    if (outcome.probeRequested) {
      reportLog.record(
        'suspect',
        { owner: who, proxyID: outcome.lease.proxyID },
        'proxy reported unreachable: held out of leases until a probe passes',
      );
    }
    if (outcome.cooldownUntil !== undefined) {
      // Proxies benched, not reports: ten workers banned on one proxy are one (ProxyTargetBanStorm).
      if (outcome.cooldownStarted === true) cooldowns.countCooldown(outcome.target, 'api');
      reportLog.record(
        'cooldown',
        {
          owner: who,
          proxyID: outcome.lease.proxyID,
          result,
          target: outcome.target ?? null,
          // What /metrics calls it (target-cooldown-metrics.ts): the SRE's way from alert to site.
          metricsLabel: cooldowns.labelOf(outcome.target),
          cooldownUntil: outcome.cooldownUntil.toISOString(),
        },
        'proxy cooling down',
      );
    }
    if (outcome.capped === true) {
      reportLog.record(
        'capped',
        { owner: who, proxyID: outcome.lease.proxyID, result },
        'target not recorded: the book is at its cap',
      );
    }
    return view;
  };

  /** The token's report rate (report_quota): a batch's items count one each. */
  const reportsAllowed = (res: Response, count: number) => {
    const who = owner(res);
    const waitMs = reportRate.take(who, count);
    if (waitMs === undefined) return true;
    const seconds = Math.max(1, Math.ceil(waitMs / 1000));
    quotaRefusal(
      res,
      'report_quota',
      `token '${who}' is over its quota of ${quotas.reportsPerSecond} reports/s; nothing was recorded; retry after ${seconds} s`,
      seconds,
    );
    return false;
  };

  app
    .route('/v1/leases/:id/report')
    .all(guard)
    .post(body, async (req, res) => {
      const report = parseReportBody(req.body);
      const requestID = parseRequestID(req.headers[REQUEST_ID_HEADER]);
      if (!reportsAllowed(res, 1)) return;
      // A batch of one: the report and the release it may ask for are one step of the store.
      const recorded = await recordReports([{ leaseID: req.params.id, ...report }], owner(res), requestID);
      if ('refused' in recorded) quotaRefusal(res, 'cooldown_quota', recorded.error.message, 60);
      else if (recorded.views[0] === undefined) leaseNotFound(res, req.params.id);
      else sendJSON(res, 200, recorded.views[0]);
    })
    .all(methodNotAllowed('POST'));

  app
    .route('/v1/reports')
    .all(guard)
    .post(body, async (req, res) => {
      const reports = parseReportsBody(req.body);
      const requestID = parseRequestID(req.headers[REQUEST_ID_HEADER]);
      const who = owner(res);
      if (!reportsAllowed(res, reports.length)) return;
      // One atomic step, in order: two reports on one lease apply as if sent one after the other.
      const recorded = await recordReports(reports, who, requestID);
      if ('refused' in recorded) {
        const { refused, error } = recorded;
        quotaRefusal(
          res,
          'cooldown_quota',
          `reports[${refused}] (lease '${reports[refused].leaseID}'): ${error.message}; none of the ${reports.length} reports was recorded`,
          60,
        );
        return;
      }
      const items = recorded.views.map((view, i) =>
        view === undefined ? { leaseID: reports[i].leaseID, ...leaseNotFoundBody(reports[i].leaseID) } : view,
      );
      sendJSON(res, 200, { items });
    })
    .all(methodNotAllowed('POST'));
}

/** The answer to one report (POST /v1/leases/{id}/report, and each item of POST /v1/reports). */
interface ReportView {
  leaseID: string;
  proxyID: string;
  result: ReportResult;
  target: string | null;
  cooldownUntil: string | null;
  suspect?: boolean;
  capped?: true;
  released?: true;
}
