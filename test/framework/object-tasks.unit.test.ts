import { pino } from 'pino';
import { ObjectTasks } from '../../framework/core/object-tasks.js';
import { TemporaryError } from '../../framework/index.js';
import type { KubeObject } from '../../framework/index.js';
import { KeyedMutex } from '../../framework/utils/keyed-mutex.js';

const logger = pino({ level: 'silent' });
const widget = (uid: string): KubeObject => ({ metadata: { name: 'w', namespace: 'ns', uid } });

describe('ObjectTasks', () => {
  it('never runs a timer while another handler of the same object holds its lock', async () => {
    const lock = new KeyedMutex();
    const shutdown = new AbortController();
    let inHandler = false;
    let overlaps = 0;
    let ticks = 0;
    const tasks = new ObjectTasks(
      [{ method: 'tick', options: { interval: 0.01 } }],
      [],
      async () => {
        if (inHandler) overlaps++;
        ticks++;
      },
      () => widget('u1'),
      lock,
      shutdown.signal,
      logger,
    );
    await tasks.ensure('ns/w', widget('u1'));
    for (let i = 0; i < 5; i++) {
      await lock.run('ns/w', async () => {
        inHandler = true;
        await new Promise((r) => setTimeout(r, 30));
        inHandler = false;
      });
    }
    await tasks.stopAll();
    expect(ticks).toBeGreaterThan(0);
    expect(overlaps).toBe(0);
  });

  it('stops a timer queued for the lock from inside the lock (a delete handled under it)', async () => {
    const lock = new KeyedMutex();
    let ticks = 0;
    const tasks = new ObjectTasks(
      [{ method: 'tick', options: { interval: 0.01 } }],
      [],
      async () => {
        ticks++;
      },
      () => widget('u1'),
      lock,
      new AbortController().signal,
      logger,
    );
    await tasks.ensure('ns/w', widget('u1'));
    const stopped = await lock.run('ns/w', async () => {
      // Long enough for the timer to wake and queue behind this holder.
      await new Promise((r) => setTimeout(r, 50));
      return await Promise.race([
        tasks.stop('ns/w').then(() => 'stopped'),
        new Promise((r) => setTimeout(() => r('deadlocked'), 1000)),
      ]);
    });
    expect(stopped).toBe('stopped');
    const count = ticks;
    await new Promise((r) => setTimeout(r, 50));
    expect(ticks).toBe(count);
  });

  it('stops timers once the object is gone from the cache', async () => {
    let present = true;
    let ticks = 0;
    const tasks = new ObjectTasks(
      [{ method: 'tick', options: { interval: 0.01 } }],
      [],
      async () => {
        ticks++;
      },
      () => (present ? widget('u1') : undefined),
      new KeyedMutex(),
      new AbortController().signal,
      logger,
    );
    await tasks.ensure('ns/w', widget('u1'));
    while (ticks < 3) await new Promise((r) => setTimeout(r, 10));
    present = false;
    await new Promise((r) => setTimeout(r, 50));
    const count = ticks;
    await new Promise((r) => setTimeout(r, 100));
    expect(ticks).toBe(count);
    await tasks.stopAll();
  });

  it('restarts a daemon after a TemporaryError and replaces the tasks of a re-created object (new uid)', async () => {
    const started: string[] = [];
    let current = widget('u1');
    const tasks = new ObjectTasks(
      [],
      [{ method: 'run', options: {} }],
      async (_m, obj, _cause, signal) => {
        started.push(obj.metadata.uid!);
        if (started.length === 1) throw new TemporaryError('again', 0.01);
        await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      },
      () => current,
      new KeyedMutex(),
      new AbortController().signal,
      logger,
    );
    await tasks.ensure('ns/w', current);
    while (started.length < 2) await new Promise((r) => setTimeout(r, 5));
    current = widget('u2');
    await tasks.ensure('ns/w', current);
    while (started.length < 3) await new Promise((r) => setTimeout(r, 5));
    expect(started).toEqual(['u1', 'u1', 'u2']);
    await tasks.stopAll();
  });
});
