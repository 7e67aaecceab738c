import { ObjectMemories } from '../../framework/core/object-memory.js';
import { WorkQueue } from '../../framework/core/queue.js';

describe('ObjectMemories', () => {
  it('keeps one record per key, for one uid: a re-created object starts afresh but keeps its scheduling', () => {
    const memories = new ObjectMemories();
    const m = memories.of('ns/a', 'uid-1');
    m.seen = true;
    m.handledGeneration = 3;
    m.released = true;
    m.triggered = true;
    expect(memories.of('ns/a', 'uid-1')).toBe(m);
    expect(memories.of('ns/a')).toBe(m); // no uid known (object gone): same record

    const again = memories.of('ns/a', 'uid-2');
    expect(again).toMatchObject({ uid: 'uid-2', seen: false, released: false, triggered: true });
    expect(again.handledGeneration).toBeUndefined();
    expect(memories.size).toBe(1);
  });

  it.each([
    ['nothing remembered', () => {}, 0],
    ['seen', (m: ReturnType<ObjectMemories['of']>) => (m.seen = true), 1],
    ['triggered', (m: ReturnType<ObjectMemories['of']>) => (m.triggered = true), 1],
    ['waiting', (m: ReturnType<ObjectMemories['of']>) => (m.waiting = { generation: 1, deleting: false }), 1],
    ['released', (m: ReturnType<ObjectMemories['of']>) => (m.released = true), 1],
  ])('prune drops an idle record only (%s)', (_case, set, left) => {
    const memories = new ObjectMemories();
    set(memories.of('k', 'u'));
    memories.prune('k');
    expect(memories.size).toBe(left);
  });

  it('forget drops the record whatever it holds', () => {
    const memories = new ObjectMemories();
    memories.of('k', 'u').seen = true;
    memories.forget('k');
    expect(memories.peek('k')).toBeUndefined();
    expect(memories.size).toBe(0);
  });
});

describe('WorkQueue.drop', () => {
  it('forgets a key’s failures and its pending delayed add', async () => {
    const q = new WorkQueue({ backoffBaseMs: 20, backoffMaxMs: 100 });
    q.addRateLimited('gone');
    q.addAfter('other', 10_000);
    expect(new Set(q.trackedKeys())).toEqual(new Set(['gone', 'other']));
    q.drop('gone');
    expect(q.trackedKeys()).toEqual(['other']);
    expect(q.retries('gone')).toBe(0);
    await new Promise((r) => setTimeout(r, 60));
    expect(q.length).toBe(0); // the dropped delayed add never fired
    q.shutDown();
  });
});
