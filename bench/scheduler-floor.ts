// What busy processes beside it alone do to a process's timers, with no API at all: the
// floor under bench/discovery-probes.ts's figures when its clients share the server's cores.
// An idle process runs 2,000 timers at 200 a second (as the probe schedule does) and reports
// their lateness p50/p99/max: alone, beside two busy loops at normal priority, and beside the
// same two at nice 19. docs/benchmarks.md (probe lateness while clients list: its method).
//
//   npm run build && node build/bench/scheduler-floor.js
import { fork } from 'node:child_process';
import { loadavg, setPriority } from 'node:os';

const TIMERS = 2000;
const SPACING_MS = 5;
const HOG_SECONDS = 13;

interface Setting {
  name: string;
  hogs: number;
  nice: number;
}

const SETTINGS: Setting[] = [
  { name: 'alone', hogs: 0, nice: 0 },
  { name: 'two busy loops, normal priority', hogs: 2, nice: 0 },
  { name: 'two busy loops, nice 19', hogs: 2, nice: 19 },
];

function spin(nice: number): void {
  if (nice !== 0) setPriority(nice);
  const end = Date.now() + HOG_SECONDS * 1000;
  while (Date.now() < end) {
    // busy: takes a core for as long as the scheduler gives it one
  }
  process.exit(0);
}

async function lateness(): Promise<number[]> {
  const late: number[] = [];
  const start = performance.now() + 100;
  await new Promise<void>((resolve) => {
    for (let i = 0; i < TIMERS; i++) {
      const due = start + i * SPACING_MS;
      setTimeout(
        () => {
          late.push(performance.now() - due);
          if (late.length === TIMERS) resolve();
        },
        Math.max(0, due - performance.now()),
      );
    }
  });
  return late.sort((a, b) => a - b);
}

async function measure(setting: Setting): Promise<string> {
  const hogs = Array.from({ length: setting.hogs }, () =>
    fork(new URL(import.meta.url).pathname, ['spin', String(setting.nice)]),
  );
  await new Promise((r) => setTimeout(r, 500));
  const load = loadavg()[0].toFixed(2);
  const late = await lateness();
  for (const hog of hogs) hog.kill();
  const at = (q: number) => late[Math.min(late.length - 1, Math.floor(q * late.length))].toFixed(2);
  return `| ${setting.name} | ${load} | ${at(0.5)} | ${at(0.99)} | ${late[late.length - 1].toFixed(2)} |`;
}

async function main(): Promise<void> {
  console.log(`\n## timer lateness beside busy processes (${TIMERS} timers, one every ${SPACING_MS} ms)\n`);
  console.log('| beside it | load average (1 min) | p50 ms | p99 ms | max ms |');
  console.log('|---|---|---|---|---|');
  for (const setting of SETTINGS) console.log(await measure(setting));
}

if (process.argv[2] === 'spin') spin(Number(process.argv[3]));
else await main();
