// The parts a script is assembled from (redis-scripts.ts): helper blocks and script bodies.

export interface LuaScript {
  readonly name: string;
  readonly source: string;
}

export type ScriptName =
  | 'acquire'
  | 'renew'
  | 'release'
  | 'report'
  | 'observe'
  | 'egress'
  | 'get'
  | 'endSession'
  | 'totals'
  | 'sweep'
  | 'usage'
  | 'standing'
  | 'suspects'
  | 'refusal'
  | 'fleet'
  | 'fleetRead'
  | 'failedAuth';

/** A helper block: Lua text and the blocks it calls (defined before it). */
export interface Block {
  needs: readonly BlockName[];
  lua: string;
}

export type BlockName =
  | 'now'
  | 'int'
  | 'keep'
  | 'count'
  | 'flags'
  | 'oldest'
  | 'statsRaw'
  | 'statsAdd'
  | 'entries'
  | 'targets'
  | 'held'
  | 'holds'
  | 'suspicions'
  | 'sessions'
  | 'leases'
  | 'loads'
  | 'requests'
  | 'releaseOne'
  | 'reportOne';

/**
 * Helpers a script's common path never calls, defined by a loader on first use: Redis runs
 * the whole chunk on every call, and each helper defined up front is a closure made and
 * collected per call (the acquire made ~20; ~0.2 µs and ~100 bytes each here).
 */
export interface Lazy {
  /** The loader's Lua name; the body calls it where it needs the exports. */
  loader: string;
  needs: readonly BlockName[];
  /** Helper names the loader returns, in this order (declared as locals above it). */
  exports: readonly string[];
}

export interface Body {
  needs: readonly BlockName[];
  lazy?: readonly Lazy[];
  body: string;
}
