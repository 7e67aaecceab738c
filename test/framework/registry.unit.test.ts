import 'reflect-metadata';
import { container, inject } from 'tsyringe';
import {
  background,
  controller,
  daemon,
  onCleanup,
  onCreate,
  onDelete,
  onResume,
  onStartup,
  onUpdate,
  timer,
  watches,
  type KindRef,
} from '../../framework/index.js';
import { handlerMetadata } from '../../framework/core/registry.js';

const WIDGET: KindRef = {
  group: 'test.example.com',
  version: 'v1',
  plural: 'widgets',
  kind: 'Widget',
  namespaced: true,
};
const SECRET: KindRef = { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true };
const DEP = Symbol('dep');

describe('decorator metadata', () => {
  const map = () => [{ namespace: 'ns', name: 'w' }];
  const when = () => true;

  @controller({ ...WIDGET, finalizer: 'test.example.com/cleanup' })
  @watches({ ...SECRET, labelSelector: 'a=b', map })
  class Widgets {
    constructor(@inject(DEP) readonly dep: string) {}
    @onCreate() @onUpdate() @onResume() async reconcile() {}
    @onDelete({ when }) async cleanup() {}
    @onDelete({ optional: true }) async bestEffort() {}
    @timer({ interval: 5, jitter: 0.1 }) async tick() {}
    @daemon({ backoff: 3 }) async run() {}
  }

  it('records the resource binding with the default concurrency of 3', () => {
    expect(handlerMetadata(Widgets).controller).toEqual({
      ...WIDGET,
      finalizer: 'test.example.com/cleanup',
      maxConcurrentReconciles: 3,
    });
  });

  it('records @watches with its selector and map', () => {
    expect(handlerMetadata(Widgets).watches).toEqual([{ ...SECRET, labelSelector: 'a=b', map }]);
  });

  it('lets create, update and resume decorators stack on one method', () => {
    const causes = handlerMetadata(Widgets).methods.flatMap((m) =>
      m.type === 'change' ? [[m.cause, m.method]] : [],
    );
    expect(causes).toEqual(
      expect.arrayContaining([
        ['create', 'reconcile'],
        ['update', 'reconcile'],
        ['resume', 'reconcile'],
      ]),
    );
    expect(causes).toHaveLength(3);
  });

  it('records delete, timer and daemon handlers with their options', () => {
    const rest = handlerMetadata(Widgets).methods.filter((m) => m.type !== 'change');
    expect(rest).toEqual([
      { type: 'delete', method: 'cleanup', options: { when } },
      { type: 'delete', method: 'bestEffort', options: { optional: true } },
      { type: 'timer', method: 'tick', options: { interval: 5, jitter: 0.1 } },
      { type: 'daemon', method: 'run', options: { backoff: 3 } },
    ]);
  });

  it('makes the class resolvable by tsyringe with its injected dependencies', () => {
    const child = container.createChildContainer();
    child.register(DEP, { useValue: 'injected' });
    expect(child.resolve(Widgets).dep).toBe('injected');
  });

  it('keeps @background classes separate from resource bindings', () => {
    @background()
    class Sweeper {
      @onStartup() async up() {}
      @onCleanup() async down() {}
      @timer({ interval: 60, leaderOnly: false }) async sweep() {}
      @daemon({ everyReplica: true }) async serve() {}
    }
    const meta = handlerMetadata(Sweeper);
    expect(meta.background).toBe(true);
    expect(meta.controller).toBeUndefined();
    expect(meta.methods.map((m) => m.type)).toEqual(['startup', 'cleanup', 'timer', 'daemon']);
  });

  it('gives an undecorated class empty metadata', () => {
    class Plain {}
    expect(handlerMetadata(Plain)).toEqual({ watches: [], methods: [] });
  });
});

describe('decorator validation', () => {
  it.each([
    [
      'a missing plural',
      () => controller({ ...WIDGET, plural: '' }),
      /@controller: "plural" must be a non-empty string/,
    ],
    [
      'a missing group',
      () => controller({ ...WIDGET, group: undefined as unknown as string }),
      /"group" must be a string/,
    ],
    [
      'zero concurrency',
      () => controller({ ...WIDGET, maxConcurrentReconciles: 0 }),
      /maxConcurrentReconciles must be an integer >= 1/,
    ],
    [
      'a @watches without map',
      () => watches({ ...SECRET, map: undefined as never }),
      /"map" must be a function/,
    ],
    ['a zero timer interval', () => timer({ interval: 0 }), /interval must be > 0 seconds/],
    [
      'a jitter above 1',
      () => timer({ interval: 1, jitter: 1.5 }),
      /jitter must be a fraction between 0 and 1/,
    ],
    ['a negative initial delay', () => timer({ interval: 1, initialDelay: -1 }), /initialDelay must be >= 0/],
    ['a zero daemon backoff', () => daemon({ backoff: 0 }), /backoff must be > 0/],
  ])('rejects %s with a clear error', (_what, decorate, message) => {
    expect(decorate).toThrow(message);
  });
});
