// The report script's call: every report (and release) of a call in one atomic step. Its
// arguments from the reports, and its reply as the outcomes the store answers.

import type { BatchReport, Lease, ReportOutcome } from './lease-store.js';
import { scopedKey } from './lease-owner.js';
import { decodeLease, decodeReportReply } from './redis-book-codec.js';

const NO_TARGET = '\u0000';
/** The report script's cooldownUntil when the target could not be recorded at a cap. */
const CAPPED = -2;

/** The report script's arguments; requested: the request key ('' = none); random: the jitter's draw. */
export function reportArgs(
  reports: readonly BatchReport[],
  owner: string | undefined,
  requested: string,
  random: () => number,
): string[] {
  const args = [requested, String(reports.length)];
  for (const { leaseID, result, details = {}, release } of reports) {
    args.push(
      scopedKey(owner, leaseID),
      result,
      details.target ?? NO_TARGET,
      details.retryAfterSeconds === undefined ? '' : String(details.retryAfterSeconds),
      String(random()),
      owner ?? '',
      // In-process reports (no owner) are the operator's own: trusted (ban-agreement.ts).
      owner === undefined || details.rotationTrusted === true ? '1' : '0',
      release === true ? '1' : '',
      details.cooldownQuota === undefined ? '' : String(details.cooldownQuota),
    );
  }
  return args;
}

/** The report script's reply; owned: a stored lease as its owner sees it. */
export function reportOutcomes(
  reports: readonly BatchReport[],
  raw: string[],
  owned: (stored: Lease) => Lease,
): (ReportOutcome | undefined)[] {
  // One element more: the first answers of this request key, replayed.
  const replayed = raw.length > reports.length;
  const replies = decodeReportReply(replayed ? raw.slice(0, reports.length) : raw);
  return replies.map((reply, i) => {
    if (reply === undefined) return undefined;
    const lease = owned(decodeLease(reports[i].leaseID, reply.value));
    const { target, until, started, suspect, probe, released } = reply;
    return {
      lease,
      ...(target === '' ? {} : { target }),
      ...(until >= 0 ? { cooldownUntil: new Date(until) } : {}),
      ...(until >= 0 && started ? { cooldownStarted: true as const } : {}),
      ...(until === CAPPED ? { capped: true as const } : {}),
      ...(suspect >= 0 ? { suspect: suspect === 1, probeRequested: probe === 1 } : {}),
      ...(released >= 0 ? { released: released === 1 } : {}),
      ...(replayed ? { replayed: true as const } : {}),
    };
  });
}
