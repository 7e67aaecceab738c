import type { FailedGeneration } from './cause.js';
import type { KubeObject } from './types.js';

/**
 * Everything one controller's process remembers about one object (after kopf's per-resource
 * memory), in one typed record instead of a collection per fact. Kept under the object's
 * key, as the work queue names objects; the record belongs to one uid, and an object
 * re-created under the same name starts with a fresh memory of itself.
 */
export interface ObjectMemory {
  uid: string | undefined;
  // About the object (reset when the uid changes):
  /** Handled or resumed by this process: a current marker then means "nothing to do", not "resume". */
  seen: boolean;
  /** Generation whose handlers this process completed (the cache may not show the marker yet). */
  handledGeneration?: number;
  /** Generation that failed permanently here (see failureMemory). */
  failed?: FailedGeneration;
  /**
   * Its delete handlers succeeded here: they do not run again in this process (without our
   * finalizer there is nothing more to do; with it, only the release is retried).
   */
  deleteHandled: boolean;
  /** We released our finalizer: a cache that has not caught up must not run the delete handlers again. */
  released: boolean;
  // About its scheduling (kept across a uid change: they name the key):
  /** An update run was asked for (a watched object, a trigger, a requeue) and not yet served. */
  triggered: boolean;
  /**
   * Waiting out a requeue delay or a backoff at this generation and deletion state. A watch
   * event that changes neither (typically the handler's own status write) does not cut the
   * wait short: otherwise a handler that records its error in status would defeat its own
   * backoff and slow requeue.
   */
  waiting?: { generation: number; deleting: boolean };
  /** Its handlers are running; `missed` is the last watch event received meanwhile. */
  active: boolean;
  missed?: KubeObject;
}

function fresh(uid: string | undefined): ObjectMemory {
  return { uid, seen: false, deleteHandled: false, released: false, triggered: false, active: false };
}

/** True when the record holds nothing worth keeping. */
function idle(m: ObjectMemory): boolean {
  return (
    !m.seen &&
    m.handledGeneration === undefined &&
    m.failed === undefined &&
    !m.deleteHandled &&
    !m.released &&
    !m.triggered &&
    m.waiting === undefined &&
    !m.active &&
    m.missed === undefined
  );
}

/** The records of one controller, by key; each is forgotten once its object is gone. */
export class ObjectMemories {
  private readonly records = new Map<string, ObjectMemory>();

  get size(): number {
    return this.records.size;
  }

  keys(): IterableIterator<string> {
    return this.records.keys();
  }

  /** The record of `key` if there is one (never creates it). */
  peek(key: string): ObjectMemory | undefined {
    return this.records.get(key);
  }

  /**
   * The record of `key`, created on first use. Given a uid other than the record's, the
   * facts about the previous object are dropped (its scheduling state stays).
   */
  of(key: string, uid?: string): ObjectMemory {
    let m = this.records.get(key);
    if (!m) {
      m = fresh(uid);
      this.records.set(key, m);
    } else if (uid !== undefined && m.uid !== uid) {
      const { triggered, waiting, active, missed } = m;
      m = { ...fresh(uid), triggered, waiting, active, missed };
      this.records.set(key, m);
    }
    return m;
  }

  forget(key: string): void {
    this.records.delete(key);
  }

  /** Drops the record of `key` if it holds nothing (an object never handled, or filtered out). */
  prune(key: string): void {
    const m = this.records.get(key);
    if (m && idle(m)) this.records.delete(key);
  }
}
