// Waits until the machine is quiet before a measured crawl. Why: a round's setup leaves work
// behind (the operator reconciling and probing a fleet just registered, the API server and
// etcd writing its status and Events, or deleting the previous round's Proxies), and a crawl
// started into it would share the two cores with that tail. Only the operator's rounds have
// such a setup, so the tail would fall on the operator's crawl alone. A guard: in the runs of
// 2026-12-03 the machine was already quiet every time (0-2 % busy after 0.5 s).
import { cpus } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

export interface SettleOptions {
  /** Quiet: the machine's cores were busy at most this share of the time (0..1). Default 0.1. */
  busyBelow?: number;
  /** Length of one sampled window. Default 250 ms. */
  windowMs?: number;
  /** Quiet windows in a row needed. Default 2. */
  quietWindows?: number;
  /** Give up waiting after this long (the crawl starts anyway). Default 15 s. */
  maxMs?: number;
}

export interface Settled {
  waitedMs: number;
  /** The busy share of the last window. */
  busyShare: number;
  /** False: maxMs passed before the machine was quiet. */
  quiet: boolean;
}

/** The machine's busy and total CPU time so far, summed over its cores (ms). */
function cpuTimes(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const { times } of cpus()) {
    const all = times.user + times.nice + times.sys + times.idle + times.irq;
    busy += all - times.idle;
    total += all;
  }
  return { busy, total };
}

/** The share of CPU time the machine's cores were busy over the last `windowMs`. */
async function busyShareOver(windowMs: number): Promise<number> {
  const before = cpuTimes();
  await sleep(windowMs);
  const after = cpuTimes();
  const total = after.total - before.total;
  return total <= 0 ? 0 : (after.busy - before.busy) / total;
}

export async function settle(options: SettleOptions = {}): Promise<Settled> {
  const { busyBelow = 0.1, windowMs = 250, quietWindows = 2, maxMs = 15_000 } = options;
  const started = Date.now();
  let quiet = 0;
  let busyShare = 1;
  while (quiet < quietWindows) {
    if (Date.now() - started >= maxMs) return { waitedMs: Date.now() - started, busyShare, quiet: false };
    busyShare = await busyShareOver(windowMs);
    quiet = busyShare < busyBelow ? quiet + 1 : 0;
  }
  return { waitedMs: Date.now() - started, busyShare, quiet: true };
}
