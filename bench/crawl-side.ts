// One side of a side-by-side round of `npm run bench:crawl -- --side-by-side`, as its own
// process (the parent pins both sides to one core; see shared-window.ts for why). It warms
// up Crawlee and the integration (crawl-warm-up.ts), starts its fleet and site (here, or apart with --world-apart: see
// crawl-world.ts), says so, waits for the parent's "go" (the operator's side needs its
// proxies registered and healthy first), crawls, and answers with its figures.
//
// Protocol (crawl-side-process.ts): the parent passes a SideConfig as JSON in argv[2]; lines on
// stdout starting with SIDE_PREFIX are messages (SideMessage, JSON), any other line is
// progress; "go" on stdin starts the crawl.
import { createInterface } from 'node:readline';
import { crawl } from './crawl-scenario.js';
import { warmUp } from './crawl-warm-up.js';
import { startLocalWorld, type RunningWorld } from './crawl-world.js';
import { startWorldProcess } from './crawl-world-process.js';
import { SIDE_PREFIX, type SideConfig, type SideMessage } from './crawl-side-process.js';

const send = (message: SideMessage) => process.stdout.write(`${SIDE_PREFIX}${JSON.stringify(message)}\n`);

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as SideConfig;
  await warmUp();
  const world = await startWorld(config);
  try {
    const go = new Promise<void>((resolve, reject) => {
      const lines = createInterface({ input: process.stdin });
      lines.on('line', (line) => {
        if (line.trim() === 'go') {
          resolve();
          lines.close();
        }
      });
      lines.on('close', () => reject(new Error('the parent closed stdin before "go"')));
    });
    send({ ready: { proxies: world.hosts.map((host, i) => ({ host, port: world.ports[i]! })) } });
    await go;
    const { operator } = config;
    const figures = await crawl({
      world,
      faults: config.faults,
      trace: config.trace,
      profile: config.profile,
      ...(config.okReportIntervalMs !== undefined ? { okReportIntervalMs: config.okReportIntervalMs } : {}),
      ...(config.profileDir !== undefined ? { profileDir: config.profileDir } : {}),
      progress: (m) => console.log(m),
      ...(config.apiCalls ? { apiCalls: config.apiCalls } : {}),
      ...(operator
        ? {
            operator: {
              discoveryURL: operator.discoveryURL,
              token: operator.token,
              proxyID: (i: number) => `${operator.namespace}/proxy-${i}`,
              selector: { run: operator.namespace },
            },
          }
        : {}),
    });
    send({ figures });
  } finally {
    await world.close();
  }
}

/** The side's fleet and site: in this process, or apart on the core `worldCore` names. */
function startWorld(config: SideConfig): Promise<RunningWorld> {
  const world = {
    proxies: config.proxies,
    first: config.first,
    pages: config.pages,
    ...(config.rateLimitPerSecond === undefined ? {} : { rateLimitPerSecond: config.rateLimitPerSecond }),
    retryAfterSeconds: 1,
  };
  return config.worldCore === undefined
    ? startLocalWorld(world)
    : startWorldProcess(world, { core: config.worldCore });
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    send({ error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    process.exit(1);
  },
);
