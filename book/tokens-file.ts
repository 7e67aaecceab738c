// The mounted tokens file, re-read on change. A Secret volume is updated by the kubelet
// swapping a symlink, which fs.watch on the file misses; re-reading a small file every
// interval and comparing contents sees every kind of change.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { ApiTokens, parseTokensFileContent, readTokensFile } from './api-tokens.js';

export const TOKENS_FILE_INTERVAL_MS = 2_000;

/** Reads and parses the file now; throws naming the file (and line) when it is unusable. */
export function loadTokensFile(path: string): { tokens: ApiTokens; text: string } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(
      `${path}: cannot read the tokens file: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
      {
        cause: err,
      },
    );
  }
  const { tokens, policies } = parseTokensFileContent(text, path);
  return { tokens: new ApiTokens(tokens, policies), text };
}

/** Told after each re-read whether the file is usable (a metric and its alert follow it). */
export type TokensFileStatusListener = (usable: boolean) => void;

export const TOKENS_FILE_USABLE_METRIC = 'proxy_operator_discovery_tokens_file_usable';

/**
 * The file's state as metrics: a gauge (1 usable, 0 unreadable or invalid since the last
 * change: an edit is not applied; the ProxyDiscoveryTokensFileUnusable alert) and a counter
 * of failed re-reads.
 */
export function tokensFileMetrics(registry: Registry): TokensFileStatusListener {
  const usable = new Gauge({
    name: TOKENS_FILE_USABLE_METRIC,
    help: 'Whether the discovery tokens file was usable at its last re-read (0: an edit was refused; the tokens before it still apply).',
    registers: [registry],
  });
  const failures = new Counter({
    name: 'proxy_operator_discovery_tokens_file_errors_total',
    help: 'Re-reads of the discovery tokens file that found it unreadable or invalid.',
    registers: [registry],
  });
  usable.set(1);
  return (ok) => {
    usable.set(ok ? 1 : 0);
    if (!ok) failures.inc();
  };
}

/**
 * Keeps `tokens` equal to the file's content. A file that turns unreadable or invalid
 * revokes nothing and adds nothing: it keeps the tokens it held, with an error log naming the
 * line and `usable: false` to the status listener (a half-written edit must not lock every
 * client out, nor open the API). A valid file without a token line (emptied) revokes every
 * token: that is how an SRE locks every client out at once.
 */
export class TokensFileWatcher {
  private timer?: NodeJS.Timeout;
  /** The content last processed; undefined after a failed read, so the next read counts. */
  private last: string | undefined;
  private failing = false;

  constructor(
    private readonly path: string,
    readonly tokens: ApiTokens,
    loadedText: string,
    private readonly logger: Logger,
    private readonly intervalMs = TOKENS_FILE_INTERVAL_MS,
    private readonly onStatus: TokensFileStatusListener = () => {},
  ) {
    this.last = loadedText;
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.check(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One re-read (the timer's work; tests call it directly). */
  async check(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      this.last = undefined;
      this.fail(`cannot read the tokens file: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      return;
    }
    if (text === this.last) return;
    try {
      const before = this.tokens.names;
      const { tokens, policies } = readTokensFile(text, this.path);
      this.tokens.replace(tokens, policies);
      this.last = text;
      this.failing = false;
      this.onStatus(true);
      const after = this.tokens.names;
      this.logger[after.length === 0 ? 'warn' : 'info'](
        {
          file: this.path,
          names: after,
          added: after.filter((n) => !before.includes(n)),
          removed: before.filter((n) => !after.includes(n)),
        },
        after.length === 0
          ? 'tokens file holds no token: every discovery API token is revoked'
          : 'discovery API tokens reloaded',
      );
    } catch (err) {
      this.last = text;
      this.fail((err as Error).message);
    }
  }

  private fail(message: string): void {
    this.onStatus(false);
    // Once per failure, not every interval: the file is re-read until it is fixed.
    if (this.failing) return;
    this.failing = true;
    this.logger.error(
      { file: this.path, err: message },
      'tokens file unusable: revoking nothing, keeping the tokens loaded before',
    );
  }
}
