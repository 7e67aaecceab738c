// The process's client tokens: one source both doors (the discovery API and the gateway) read.
// Loaded once and watched by one TokensFileWatcher, so a line added to or deleted from the
// tokens file takes effect for both doors at the same reload, and the file's metrics are
// registered and counted once per process.
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { ApiTokens } from '../book/api-tokens.js';
import { SourceLimiter } from '../discovery/source-limiter.js';
import {
  loadTokensFile,
  tokensFileMetrics,
  TokensFileWatcher,
  TOKENS_FILE_INTERVAL_MS,
} from '../book/tokens-file.js';
import type { DiscoverySettings } from './settings.js';

/** What the doors need of the process's tokens (owned here, injected into both runners). */
export interface ClientTokens {
  /** The live named tokens; undefined when none is configured (the API unauthenticated, the gateway 407). */
  readonly tokens: ApiTokens | undefined;
  /** A door opens: the first one starts watching the file. */
  acquire(): void;
  /** A door closes: the last one stops watching it. */
  release(): void;
  /**
   * Wrong tokens per source address, counted once for both doors: a guesser gets the API's
   * 20 (then 5/s) in all, not that at each door.
   */
  readonly failedAuth: SourceLimiter;
}

export interface ClientTokensOptions {
  registry: Registry;
  logger: Logger;
  /** Between re-reads of the file (tests shorten it). */
  intervalMs?: number;
}

/**
 * The tokens `--discovery-tokens-file` or DISCOVERY_TOKEN configure. Throws naming the file
 * (and line) when the file is unusable: the entry point stops start-up with it.
 */
export function createClientTokens(
  settings: Pick<DiscoverySettings, 'token' | 'tokensFile'>,
  options: ClientTokensOptions,
): ClientTokens {
  const { tokensFile } = settings;
  if (tokensFile === undefined) {
    const token = settings.token.trim();
    return fixedTokens(token === '' ? undefined : ApiTokens.single(token));
  }
  const { tokens, text } = loadTokensFile(tokensFile);
  const logger = options.logger.child({ component: 'tokens' });
  logger.info({ file: tokensFile, names: tokens.names }, 'discovery API tokens loaded');
  const watcher = new TokensFileWatcher(
    tokensFile,
    tokens,
    text,
    logger,
    options.intervalMs ?? TOKENS_FILE_INTERVAL_MS,
    tokensFileMetrics(options.registry),
  );
  let doors = 0;
  return {
    tokens,
    failedAuth: new SourceLimiter(),
    acquire() {
      if (doors++ === 0) watcher.start();
    },
    release() {
      if (doors === 0) return;
      if (--doors === 0) watcher.stop();
    },
  };
}

/** Tokens that never change (one DISCOVERY_TOKEN, or none). */
function fixedTokens(tokens: ApiTokens | undefined): ClientTokens {
  return { tokens, failedAuth: new SourceLimiter(), acquire() {}, release() {} };
}
