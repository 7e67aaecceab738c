// The share of a process's busy CPU spent in some of its code (bench/cpu-share.ts).
import { describe, expect, it } from '@jest/globals';
import { cpuShare, type CpuProfile } from '../../bench/cpu-share.js';

// A call tree: root -> main (app.js) -> lease (client.js) -> parse (undici.js); root -> (idle);
// root -> (garbage collector).
const nodes: CpuProfile['nodes'] = [
  { id: 1, callFrame: { url: '', functionName: '(root)' }, children: [2, 5, 6] },
  { id: 2, callFrame: { url: 'file:///app.js', functionName: 'main' }, children: [3] },
  { id: 3, callFrame: { url: 'file:///client.js', functionName: 'lease' }, children: [4] },
  { id: 4, callFrame: { url: 'file:///undici.js', functionName: 'parse' } },
  { id: 5, callFrame: { url: '', functionName: '(idle)' } },
  { id: 6, callFrame: { url: '', functionName: '(garbage collector)' } },
];
const profile = (samples: number[]): CpuProfile => ({ nodes, samples, timeDeltas: samples.map(() => 1000) });
const client = (url: string) => url.endsWith('client.js');

describe('cpuShare', () => {
  it.each<[string, number[], number, number]>([
    ['no samples: nothing busy', [], 0, 0],
    ['idle samples are not busy', [5, 5], 0, 0],
    ['a sample in our frame is ours', [3], 1, 1],
    ['a sample in a callee of our frame is ours too', [4], 1, 1],
    ['a sample in a caller of our frame is not', [2], 1, 0],
    ["the garbage collector is busy, and nobody's", [6], 1, 0],
    ['mixed', [2, 3, 4, 5, 6, 2], 5, 2],
  ])('%s', (_, samples, busyMs, oursMs) => {
    expect(cpuShare(profile(samples), client)).toEqual({ busyMs, oursMs });
  });
});
