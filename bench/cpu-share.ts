// The share of a process's busy CPU spent in some of its code, from a V8 CPU profile taken in
// the process itself. A ratio within one run: unlike pages/s or CPU ms per page, it does not
// move with the machine's speed, which on this two-core VM drifts by a third between rounds.
import { Session } from 'node:inspector/promises';

/** The parts of a V8 CPU profile (Profiler.stop) this module reads. */
export interface CpuProfile {
  nodes: { id: number; callFrame: { url: string; functionName: string }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

export interface CpuShare {
  /** Sampled time not idle, in ms. */
  busyMs: number;
  /** Of it, samples with a frame that `ours` claims anywhere on the stack, in ms. */
  oursMs: number;
}

/** Splits a profile's busy time by whether a frame of the sample's stack is ours. */
export function cpuShare(profile: CpuProfile, ours: (url: string) => boolean): CpuShare {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  // Whether a node or any caller of it is ours, memoised per node.
  const claimed = new Map<number, boolean>();
  const isOurs = (id: number): boolean => {
    const known = claimed.get(id);
    if (known !== undefined) return known;
    const node = byId.get(id);
    const up = parent.get(id);
    const result = node !== undefined && (ours(node.callFrame.url) || (up !== undefined && isOurs(up)));
    claimed.set(id, result);
    return result;
  };
  let busyUs = 0;
  let oursUs = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    const name = byId.get(id)?.callFrame.functionName;
    if (name === '(idle)') return;
    busyUs += dt;
    if (isOurs(id)) oursUs += dt;
  });
  return { busyMs: busyUs / 1000, oursMs: oursUs / 1000 };
}

/** Starts V8's sampling profiler in this process; the returned function stops it. */
export async function startCpuProfile(intervalUs = 1000): Promise<() => Promise<CpuProfile>> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: intervalUs });
  await session.post('Profiler.start');
  return async () => {
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    return profile as CpuProfile;
  };
}
