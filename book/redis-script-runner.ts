// How the Redis store runs its scripts (redis-scripts.ts): built once with the store's
// settings as constants, loaded into Redis's script cache, called with EVALSHA (the source
// once more after a restart emptied the cache), and Redis's errors that mean "not now"
// turned into StoreUnavailableError.

import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { COOLDOWN_JITTER } from './cooldown-policy.js';
import type { LeaseBookSettings } from './lease-book-settings.js';
import type { Clock } from './clock.js';
import { WINDOW_BUCKETS } from './outcome-window.js';
import { buildScripts, type LuaScript, type ScriptName } from './redis-scripts.js';
import { StoreUnavailableError } from './store-unavailable.js';

/** What a 503 store_unavailable tells the client to wait. */
export const STORE_RETRY_AFTER_SECONDS = 1;

export class RedisScriptRunner {
  private readonly scripts: Record<ScriptName, LuaScript>;
  private readonly shas = {} as Record<ScriptName, string>;
  private readonly countersKey: string;

  /** prefix: the hash-tagged key prefix; clock: a test's (absent: Redis's TIME). */
  constructor(
    private readonly redis: Redis,
    prefix: string,
    settings: LeaseBookSettings,
    private readonly clock: Clock | undefined,
  ) {
    this.countersKey = `${prefix}:counters`;
    // Settings are constants of this store's scripts: no per-call parsing in Redis.
    this.scripts = buildScripts({
      prefix,
      windowMillis: settings.statsWindowSeconds * 1000,
      bucketMillis: settings.bucketMillis,
      idleMillis: settings.sessionIdleMillis,
      maxSessions: settings.maxSessions,
      banBaseMillis: settings.banBaseMillis,
      banMaxMillis: settings.banMaxMillis,
      rateLimitBaseMillis: settings.rateLimitBaseMillis,
      rateLimitMaxMillis: settings.rateLimitMaxMillis,
      singleCooldownWindow: settings.singleCooldownWindow,
      suspicionMillis: settings.suspicionTimeoutMillis,
      holdoffMillis: settings.suspicionHoldoffMillis,
      maxTargetsPerProxy: settings.maxTargetsPerProxy,
      maxTargetEntries: settings.maxTargetEntries,
      jitter: COOLDOWN_JITTER,
      buckets: WINDOW_BUCKETS,
      clockArgument: clock !== undefined,
    });
    for (const script of Object.values(this.scripts)) {
      this.shas[script.name as ScriptName] = createHash('sha1').update(script.source).digest('hex');
    }
  }

  /**
   * Loads every script into Redis's script cache (SCRIPT LOAD: idempotent). Done at start and
   * on every (re)connect: a fresh or restarted Redis would answer a call's first EVALSHA
   * NOSCRIPT, a second round trip; and a write sent while Redis is frozen would then be that
   * NOSCRIPT when it resumes, so its retry's request id would find nothing recorded.
   */
  async loadScripts(): Promise<void> {
    for (const script of Object.values(this.scripts))
      await this.guard(() => this.redis.script('LOAD', script.source));
  }

  /**
   * Runs a script: one EVALSHA, its errors as StoreUnavailableError where they mean "not now".
   * A plain promise chain, no async wrappers: each awaited layer costs the acquire and the
   * release a microtask and an allocation.
   */
  eval(name: ScriptName, args: string[]): Promise<unknown> {
    // A test's clock goes first; without one the scripts read Redis's TIME and take no clock
    // argument (redis-scripts.ts's header: A).
    if (this.clock !== undefined) args.unshift(String(Math.floor(this.clock.now())));
    return this.redis
      .evalsha(this.shas[name], 1, this.countersKey, ...args)
      .then(undefined, (err: unknown) => this.reload(name, args, err));
  }

  /** A restarted Redis has an empty script cache: the source goes once, then EVALSHA again. */
  private reload(name: ScriptName, args: string[], err: unknown): Promise<unknown> {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) return Promise.reject(translate(err));
    return this.redis
      .eval(this.scripts[name].source, 1, this.countersKey, ...args)
      .then(undefined, (e: unknown) => Promise.reject(translate(e)));
  }

  /** Runs a call on the connection, its errors translated as a script's are. */
  async guard<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw translate(err);
    }
  }
}

/** Redis errors that mean "not now" rather than a bug in a script. */
const TRANSIENT_REPLIES = [
  'LOADING',
  'BUSY',
  'MASTERDOWN',
  'CLUSTERDOWN',
  'READONLY',
  'TRYAGAIN',
  'OOM',
  'NOREPLICAS',
];

/**
 * ioredis's errors for a command that was written and got no answer: a frozen or slow Redis
 * (the command timeout) or a connection that closed under it. Redis may run it when it
 * catches up. Every other failure (not connected: no offline queue) never sent the command.
 */
const SENT_UNANSWERED = ['Command timed out', 'Connection is closed'];

/** A Redis failure as the store reports it: StoreUnavailableError when it means "not now". */
export function translate(err: unknown): unknown {
  if (err instanceof StoreUnavailableError) return err;
  if (!(err instanceof Error)) return err;
  if (err.name === 'ReplyError' && !TRANSIENT_REPLIES.some((code) => err.message.startsWith(code)))
    return err;
  return new StoreUnavailableError(`lease store unavailable: ${err.message}`, STORE_RETRY_AFTER_SECONDS, {
    cause: err,
    mayHaveApplied: SENT_UNANSWERED.some((text) => err.message.startsWith(text)),
  });
}
