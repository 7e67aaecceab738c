// The parent's end of tenant B (tenant-b-main.ts): B's attacks in a child process, as another
// team's client is another machine's. From the built bench (build/bench/*.js) it runs the built
// entry; from source (the jest test) the .ts entry through the test's TypeScript hooks.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { canPin, TASKSET } from './crawl-side-process.js';
import type { TenantBFigures } from './tenants-world.js';

/** Lines on B's stdout that start with this are messages (TenantBMessage, JSON). */
export const TENANT_B_PREFIX = '@@tenant-b ';

/** attackAsTenantB's options that cross the process boundary (all but the callbacks). */
export interface TenantBConfig {
  discoveryURL: string;
  token: string;
  selector: Record<string, string>;
  namespace: string;
  proxyNames: string[];
  sessions: number;
  junkReports: number;
  spamFrom: string;
}

export type TenantBMessage = { attacking: true } | { figures: TenantBFigures } | { error: string };

const here = fileURLToPath(import.meta.url);
const fromSource = here.endsWith('.ts');
const root = fileURLToPath(new URL(fromSource ? '..' : '../..', import.meta.url));

export class TenantBProcess {
  /** B holds its quota of leases and its other attacks have begun. */
  readonly attacking: Promise<void>;
  /** B's figures, once it stopped. */
  readonly figures: Promise<TenantBFigures>;
  private readonly child: ChildProcess;

  /** `core`: pin B to this core (bench:tenants --apart), when taskset is there. */
  constructor(config: TenantBConfig, progress: (line: string) => void = () => {}, core?: number) {
    const entry = fromSource
      ? [
          '--no-warnings',
          '--import',
          join(root, 'test/harness/ts-hooks.ts'),
          join(root, 'bench/tenant-b-main.ts'),
        ]
      : [join(root, 'build/bench/tenant-b-main.js')];
    const node = [process.execPath, ...entry, JSON.stringify(config)];
    const [command, ...args] = core !== undefined && canPin ? [TASKSET, '-c', String(core), ...node] : node;
    this.child = spawn(command!, args, { stdio: ['pipe', 'pipe', 'inherit'] });
    let attacking!: () => void;
    let done!: (f: TenantBFigures) => void;
    let failAttacking!: (err: Error) => void;
    let failFigures!: (err: Error) => void;
    this.attacking = new Promise<void>((res, rej) => ((attacking = res), (failAttacking = rej)));
    this.figures = new Promise<TenantBFigures>((res, rej) => ((done = res), (failFigures = rej)));
    const fail = (err: Error) => {
      failAttacking(err);
      failFigures(err);
    };
    // Whichever a caller is not awaiting yet must not surface as unhandled.
    this.attacking.catch(() => undefined);
    this.figures.catch(() => undefined);
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      if (!line.startsWith(TENANT_B_PREFIX)) return progress(line);
      const message = JSON.parse(line.slice(TENANT_B_PREFIX.length)) as TenantBMessage;
      if ('attacking' in message) attacking();
      else if ('figures' in message) done(message.figures);
      else fail(new Error(`tenant B failed: ${message.error}`));
    });
    this.child.once('close', (code, signal) =>
      fail(new Error(`tenant B exited (${code ?? signal}) before its figures`)),
    );
  }

  /** Ends B's attacks (once their minimums are sent); its figures follow. */
  stop(): void {
    this.child.stdin!.end('stop\n');
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}
