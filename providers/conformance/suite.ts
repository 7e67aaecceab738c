import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { CreateRequest, Instance, Provider } from '../contract.js';
import { isNotFound, isPermanent, isProviderError } from '../errors.js';

type Maybe<T> = T | Promise<T>;

/** What the kit needs to know about the provider under test. */
export interface ConformanceSubject {
  /** Names the suite, e.g. "aws". */
  name: string;
  /** The provider under test, over a working backend. Called once, before the suite. */
  provider(): Maybe<Provider>;
  /** Placement its create needs (zone, machine type, image…). */
  placement?: CreateRequest['placement'];
  /** A well-formed providerID the backend has no instance for. */
  unknownID: string;
  /**
   * A provider of the same type whose backend accepts calls and never answers (a black-hole
   * endpoint): every call must still end as soon as its AbortSignal aborts. Optional: without
   * it that case is skipped, and its title in the output says so.
   */
  unresponsive?(): Maybe<Provider>;
  /**
   * A provider of the same type whose backend fails every call (connection refused, say).
   * Optional: without it only the invalid-request case of the taxonomy runs, and the skipped
   * one says why.
   */
  failing?(): Maybe<Provider>;
  /**
   * Puts into the backend instances listByTag(owner) must never return: one without the GC
   * labels (someone else's), and one managed but without an owner label (made before owners
   * existed). Optional: a backend only the provider can write to has nothing to seed.
   */
  seedForeign?(owner: string): Promise<void>;
  /** The backend keeps a new instance provisioning for a while, so get() right after create() sees it. */
  provisionsVisibly?: boolean;
  /** How long listByTag and get may lag behind create and delete (eventually consistent APIs). */
  settleMillis?: number;
  /** Releases what the subject started (servers, clients), after the suite. */
  teardown?(): Promise<void>;
}

/** Calls that must end within this long once their signal aborts. */
const ABORT_DEADLINE_MS = 2_000;

/**
 * Registers the conformance suite for one provider with jest:
 *
 * ```ts
 * import { describeProviderConformance } from 'proxy-operator/conformance';
 * describeProviderConformance({ name: 'example', provider: () => new ExampleProvider(...), ... });
 * ```
 */
export function describeProviderConformance(subject: ConformanceSubject): void {
  describe(`the ${subject.name} provider keeps the provider contract`, () => {
    const run = randomUUID().slice(0, 8);
    let provider: Provider;
    const created: string[] = [];
    let counter = 0;

    /** A fresh request: its own UID, under this run's owner unless told otherwise. */
    const request = (overrides: Partial<CreateRequest> = {}): CreateRequest => {
      counter += 1;
      return {
        uid: randomUUID(),
        proxy: `conformance-${run}/proxy-${counter}`,
        namespace: `conformance-${run}`,
        owner: `conformance-${run}`,
        port: 3128,
        placement: { ...subject.placement },
        ...overrides,
      };
    };
    const create = async (req: CreateRequest, signal?: AbortSignal) => {
      const id = await provider.create(req, signal);
      created.push(id);
      return id;
    };
    const settle = subject.settleMillis ?? 0;
    /** Polls until `check` holds (eventually consistent backends); the last failure is thrown. */
    const eventually = async (check: () => Promise<void>) => {
      const deadline = Date.now() + Math.max(settle, 0) + 5_000;
      for (;;) {
        try {
          return await check();
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    };
    const listedFor = async (owner: string, uid?: string) =>
      (await provider.listByTag(owner)).filter((i) => uid === undefined || i.uid === uid);
    const live = (instances: Instance[]) => instances.filter((i) => i.state !== 'Terminated');

    beforeAll(async () => {
      provider = await subject.provider();
    });

    afterAll(async () => {
      await Promise.allSettled(created.map((id) => provider?.delete(id)));
      await subject.teardown?.();
    });

    it('create returns a providerID without waiting for the instance to run, and get finds it with its ownership', async () => {
      const started = Date.now();
      const req = request({ revision: 'abc123' });
      const id = await create(req);
      expect(typeof id).toBe('string');
      expect(id).not.toBe('');
      const instance = await eventuallyGet(provider, id, settle);
      expect(instance).toMatchObject({
        id,
        uid: req.uid,
        owner: req.owner,
        namespace: req.namespace,
        revision: 'abc123',
      });
      expect(['Provisioning', 'Running']).toContain(instance.state);
      if (subject.provisionsVisibly) expect(instance.state).toBe('Provisioning');
      expectCreationTime(instance, started);
    });

    it('create is idempotent under retry: the same request gives the same providerID and one instance', async () => {
      const req = request();
      const first = await create(req);
      expect(await create(req)).toBe(first);
      const concurrent = await Promise.all([create(req), create(req)]);
      expect(concurrent).toEqual([first, first]);
      await eventually(async () => {
        expect(live(await listedFor(req.owner, req.uid)).map((i) => i.id)).toEqual([first]);
      });
    });

    it('a new revision of the same Proxy is a new instance (a replacement never reuses the providerID)', async () => {
      const req = request({ revision: 'aaaa1111' });
      const first = await create(req);
      const second = await create({ ...req, revision: 'bbbb2222' });
      expect(second).not.toBe(first);
      await eventually(async () => {
        const listed = live(await listedFor(req.owner, req.uid));
        expect(listed.map((i) => [i.id, i.revision]).sort()).toEqual(
          [
            [first, 'aaaa1111'],
            [second, 'bbbb2222'],
          ].sort(),
        );
      });
    });

    it('get answers NotFound for an unknown providerID', async () => {
      const err = await failure(provider.get(subject.unknownID));
      expect(isNotFound(err)).toBe(true);
    });

    it('delete is idempotent and NotFound-safe; the instance then reads as gone', async () => {
      const req = request();
      const id = await create(req);
      await eventuallyGet(provider, id, settle);
      await expect(provider.delete(id)).resolves.toBeUndefined();
      await expect(provider.delete(id)).resolves.toBeUndefined();
      await expect(provider.delete(subject.unknownID)).resolves.toBeUndefined();
      await eventually(async () => {
        const after = await provider.get(id).then(
          (i) => i.state,
          (err: unknown) => (isNotFound(err) ? 'NotFound' : Promise.reject(err)),
        );
        expect(['NotFound', 'Terminated']).toContain(after);
      });
    });

    it("listByTag returns only the owner's own instances, with their GC labels and creation times", async () => {
      const started = Date.now();
      const ownerA = `conformance-${run}-a`;
      const ownerB = `conformance-${run}-b`;
      const a1 = request({ owner: ownerA, namespace: 'team-one', revision: 'r1' });
      const a2 = request({ owner: ownerA, namespace: 'team-two', revision: 'r2' });
      const b1 = request({ owner: ownerB, namespace: 'team-one', revision: 'r1' });
      const ids = new Map([
        [a1.uid, await create(a1)],
        [a2.uid, await create(a2)],
        [b1.uid, await create(b1)],
      ]);
      await subject.seedForeign?.(ownerA);
      await eventually(async () => {
        const listedA = live(await provider.listByTag(ownerA));
        expect(listedA.map((i) => i.uid).sort()).toEqual([a1.uid, a2.uid].sort());
        for (const [instance, req] of listedA.map((i) => [i, i.uid === a1.uid ? a1 : a2] as const)) {
          expect(instance).toMatchObject({
            id: ids.get(req.uid),
            owner: ownerA,
            namespace: req.namespace,
            revision: req.revision,
          });
          expectCreationTime(instance, started);
        }
        expect(live(await provider.listByTag(ownerB)).map((i) => [i.uid, i.owner])).toEqual([
          [b1.uid, ownerB],
        ]);
      });
      expect(await provider.listByTag(`conformance-${run}-nobody`)).toEqual([]);
    });

    it('an invalid request (port 0) is Permanent, a taxonomy error', async () => {
      const err = await failure(provider.create(request({ port: 0 })));
      expect(isPermanent(err)).toBe(true);
    });

    /** Registers a case needing an optional backend; without it, skipped with the reason in its title. */
    const needing =
      (backend: 'failing' | 'unresponsive') =>
      (title: string, fn: () => Promise<void>): void => {
        if (subject[backend]) it(title, fn);
        else it.skip(`${title} (SKIPPED: the subject gives no ${backend}() backend)`, fn);
      };

    needing('failing')('every failure of a failing backend is one of the four taxonomy errors', async () => {
      const failing = await subject.failing!();
      const req = request();
      const failures = [
        await failure(failing.create(req)),
        await failure(failing.get(subject.unknownID)),
        await failure(failing.delete(subject.unknownID)),
        await failure(failing.listByTag(req.owner)),
      ];
      for (const err of failures)
        expect(isProviderError(err) ? err.kind : err).toMatch(
          /^(NotFound|QuotaExceeded|Transient|Permanent)$/,
        );
    });

    it('a call whose signal is already aborted rejects with its reason and changes nothing', async () => {
      const ctl = new AbortController();
      const reason = new Error('aborted before the call');
      ctl.abort(reason);
      const req = request();
      await expect(provider.create(req, ctl.signal)).rejects.toBe(reason);
      await expect(provider.get(subject.unknownID, ctl.signal)).rejects.toBe(reason);
      await expect(provider.delete(subject.unknownID, ctl.signal)).rejects.toBe(reason);
      await expect(provider.listByTag(req.owner, ctl.signal)).rejects.toBe(reason);
      await new Promise((r) => setTimeout(r, settle));
      expect(await listedFor(req.owner, req.uid)).toEqual([]);
    });

    needing('unresponsive')(
      'a call to an unresponsive backend ends as soon as its signal aborts, with the reason',
      async () => {
        const stuck = await subject.unresponsive!();
        const req = request();
        const calls: Array<[string, (signal: AbortSignal) => Promise<unknown>]> = [
          ['create', (s) => stuck.create(req, s)],
          ['get', (s) => stuck.get(subject.unknownID, s)],
          ['delete', (s) => stuck.delete(subject.unknownID, s)],
          ['listByTag', (s) => stuck.listByTag(req.owner, s)],
        ];
        for (const [op, call] of calls) {
          const ctl = new AbortController();
          const reason = new Error(`abort ${op}`);
          const pending = call(ctl.signal);
          const early = await within(
            150,
            pending.then(
              () => 'resolved',
              (err: unknown) => `rejected: ${String(err)}`,
            ),
            'pending',
          );
          expect([op, early]).toEqual([op, 'pending']);
          ctl.abort(reason);
          const outcome = await within(
            ABORT_DEADLINE_MS,
            pending.then(
              () => 'resolved',
              (err: unknown) => err,
            ),
            `still pending ${ABORT_DEADLINE_MS} ms after the abort`,
          );
          expect([op, outcome]).toEqual([op, reason]);
        }
      },
    );
  });
}

/**
 * What `promise` settles to within `ms`, else `late`. The timer is cleared either way: one left
 * running would keep the plugin's jest from exiting after its last test.
 */
async function within<T>(ms: number, promise: Promise<T>, late: string): Promise<T | string> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<string>((resolve) => (timer = setTimeout(() => resolve(late), ms)));
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to fail, but it succeeded');
}

/** get(), allowing an eventually consistent backend a moment to show a new instance. */
async function eventuallyGet(provider: Provider, id: string, settleMillis: number): Promise<Instance> {
  const deadline = Date.now() + settleMillis + 5_000;
  for (;;) {
    try {
      return await provider.get(id);
    } catch (err) {
      if (!isNotFound(err) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** A creation time is a real Date near now: the orphan sweep's age grace reads it. */
function expectCreationTime(instance: Instance, startedMs: number): void {
  expect(instance.createdAt).toBeInstanceOf(Date);
  const at = instance.createdAt.getTime();
  // Clouds stamp whole seconds, and clocks differ a little.
  expect(at).toBeGreaterThan(startedMs - 120_000);
  expect(at).toBeLessThan(Date.now() + 120_000);
}
