// The book's fair share among tokens (discovery/fair-share.ts): the rules as tables, then the
// shell (book-turns.ts) in the order it lets operations run.
import { describe, expect, it } from '@jest/globals';
import { BookTurns, type Turn } from '../../discovery/book-turns.js';
import {
  admit,
  nextHead,
  operationCost,
  startTag,
  type Admission,
  type ShareLoad,
} from '../../discovery/fair-share.js';

const limits = { inFlight: 2, queuedPerToken: 3 };

describe('admit', () => {
  const cases: [string, ShareLoad, Admission][] = [
    ['an idle book: runs', { inFlight: 0, queued: 0, queuedOfToken: 0 }, 'run'],
    ['a free slot, nobody waiting: runs', { inFlight: 1, queued: 0, queuedOfToken: 0 }, 'run'],
    ['every slot busy: waits', { inFlight: 2, queued: 0, queuedOfToken: 0 }, 'queue'],
    [
      'a free slot but others waiting: waits (never overtakes)',
      { inFlight: 1, queued: 1, queuedOfToken: 0 },
      'queue',
    ],
    ['its own queue one short of the bound: waits', { inFlight: 2, queued: 5, queuedOfToken: 2 }, 'queue'],
    ['its own queue at the bound: refused', { inFlight: 2, queued: 3, queuedOfToken: 3 }, 'book_queue_full'],
    ["another token's long queue: still waits", { inFlight: 2, queued: 200, queuedOfToken: 0 }, 'queue'],
  ];
  it.each(cases)('%s', (_name, load, expected) => {
    expect(admit(load, limits)).toBe(expected);
  });
});

describe('startTag', () => {
  const cases: [string, number, number, number][] = [
    ['an idle token starts at the virtual time', 10, 0, 10],
    ['a token with a backlog starts where its last finished', 10, 25, 25],
    ['a token that fell behind the virtual time catches up to it, not below', 40, 25, 40],
  ];
  it.each(cases)('%s', (_name, virtualTime, finish, expected) => {
    expect(startTag(virtualTime, finish)).toBe(expected);
  });
});

describe('nextHead', () => {
  const cases: [string, { start: number; seq: number }[], number][] = [
    ['nobody waits', [], -1],
    ['one head', [{ start: 5, seq: 9 }], 0],
    [
      'the smallest start tag',
      [
        { start: 7, seq: 1 },
        { start: 3, seq: 8 },
        { start: 5, seq: 2 },
      ],
      1,
    ],
    [
      'equal tags: the earlier arrival',
      [
        { start: 3, seq: 8 },
        { start: 3, seq: 4 },
      ],
      1,
    ],
  ];
  it.each(cases)('%s', (_name, heads, expected) => {
    expect(nextHead(heads)).toBe(expected);
  });
});

describe('operationCost', () => {
  const cases: [string, number | undefined, number][] = [
    ['a single operation', undefined, 1],
    ['a batch of 100 reports', 100, 100],
    ['an empty batch still costs one', 0, 1],
    ['beyond the largest batch: the largest', 5000, 100],
    ['not a number: one', Number.NaN, 1],
  ];
  it.each(cases)('%s', (_name, items, expected) => {
    expect(operationCost(items, 100)).toBe(expected);
  });
});

describe('BookTurns', () => {
  /** Enters each [token, cost] in order; returns the order they run in as turns end one by one. */
  async function runOrder(turns: BookTurns, arrivals: [string, number][]): Promise<string[]> {
    const ran: string[] = [];
    const started: Turn[] = [];
    for (const [token, cost] of arrivals) {
      const turn = turns.enter(token, cost);
      if (turn === 'book_queue_full') throw new Error('refused');
      void turn.ready.then(() => {
        ran.push(token);
        started.push(turn);
      });
    }
    const settle = () => new Promise((r) => setImmediate(r));
    await settle();
    // One slot: the i-th to run ends i-th, as a busy book answers them.
    for (let i = 0; i < arrivals.length; i++) {
      started[i]?.leave();
      await settle();
    }
    return ran;
  }

  it("runs a token that arrives idle next, ahead of another token's backlog", async () => {
    const turns = new BookTurns({ inFlight: 1, queuedPerToken: 100 });
    const order = await runOrder(turns, [
      ['b', 1],
      ['b', 1],
      ['b', 1],
      ['b', 1],
      ['a', 1],
    ]);
    // b's first was running; a arrived behind b's backlog of 3 and runs right after it.
    expect(order).toEqual(['b', 'a', 'b', 'b', 'b']);
  });

  it('alternates two backlogged tokens of equal cost', async () => {
    const turns = new BookTurns({ inFlight: 1, queuedPerToken: 100 });
    const order = await runOrder(turns, [
      ['b', 1],
      ['b', 1],
      ['b', 1],
      ['a', 1],
      ['a', 1],
      ['a', 1],
    ]);
    expect(order).toEqual(['b', 'a', 'b', 'a', 'b', 'a']);
  });

  it('weighs a batch by its cost: a 100-report batch lets the other token run its singles first', async () => {
    const turns = new BookTurns({ inFlight: 1, queuedPerToken: 100 });
    const order = await runOrder(turns, [
      ['b', 100],
      ['b', 100],
      ['a', 1],
      ['a', 1],
      ['a', 1],
    ]);
    expect(order).toEqual(['b', 'a', 'a', 'a', 'b']);
  });

  it('refuses a token past its queue bound, not another token', () => {
    const turns = new BookTurns({ inFlight: 1, queuedPerToken: 2 });
    expect(turns.enter('b', 1)).not.toBe('book_queue_full'); // runs
    expect(turns.enter('b', 1)).not.toBe('book_queue_full'); // waits (1)
    expect(turns.enter('b', 1)).not.toBe('book_queue_full'); // waits (2)
    expect(turns.enter('b', 1)).toBe('book_queue_full');
    expect(turns.enter('a', 1)).not.toBe('book_queue_full');
    expect(turns.load).toEqual({ running: 1, waiting: 3 });
  });

  it('gives back the place of an operation that leaves before its turn, and each slot once', async () => {
    const waits: [string, number][] = [];
    const turns = new BookTurns({ inFlight: 1, queuedPerToken: 5 }, (t, ms) => waits.push([t, ms]));
    const first = turns.enter('b', 1);
    const gone = turns.enter('b', 1);
    const next = turns.enter('a', 1);
    if (first === 'book_queue_full' || gone === 'book_queue_full' || next === 'book_queue_full')
      throw new Error('refused');
    gone.leave();
    expect(turns.load).toEqual({ running: 1, waiting: 1 });
    first.leave();
    first.leave(); // a second leave (finish, then close) frees nothing more
    await next.ready;
    expect(turns.load).toEqual({ running: 1, waiting: 0 });
    next.leave();
    expect(turns.load).toEqual({ running: 0, waiting: 0 });
    expect(waits.map(([t]) => t)).toEqual(['b', 'a']);
  });
});
