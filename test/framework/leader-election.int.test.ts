import 'reflect-metadata';
import { inject } from 'tsyringe';
import {
  background,
  controller,
  daemon,
  onCreate,
  onResume,
  timer,
  type HandlerContext,
  type Operator,
  type OperatorContext,
} from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { eventually, WIDGET, WidgetWorld, type Widget } from './widget-world.js';

interface Entry {
  who: string;
  what: 'handled' | 'leader-timer' | 'replica-daemon';
  name?: string;
  at: number;
}
const LOG = Symbol('log');
const WHO = Symbol('who');

@controller({ ...WIDGET })
class Handled {
  constructor(
    @inject(LOG) private readonly log: Entry[],
    @inject(WHO) private readonly who: string,
  ) {}

  @onCreate() @onResume() async reconcile(ctx: HandlerContext<Widget>) {
    this.log.push({ who: this.who, what: 'handled', name: ctx.object.metadata.name, at: Date.now() });
  }
}

@background()
class Work {
  constructor(
    @inject(LOG) private readonly log: Entry[],
    @inject(WHO) private readonly who: string,
  ) {}

  @timer({ interval: 0.5 }) async leaderTimer() {
    this.log.push({ who: this.who, what: 'leader-timer', at: Date.now() });
  }

  @daemon({ everyReplica: true }) async replicaDaemon(ctx: OperatorContext) {
    this.log.push({ who: this.who, what: 'replica-daemon', at: Date.now() });
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
  }
}

const LEASE = { leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 1 };

describe('leader election', () => {
  let world: WidgetWorld;
  const log: Entry[] = [];
  const operators = new Map<string, Operator>();
  const make = (who: string) => {
    const op = world.operator(
      [Handled, Work],
      (c) => {
        c.register(LOG, { useValue: log });
        c.register(WHO, { useValue: who });
      },
      { leaderElection: { namespace: world.namespace, name: 'fw-leader', identity: who, ...LEASE } },
    );
    operators.set(who, op);
    return op;
  };
  const leaders = () => [...operators].filter(([, op]) => op.isLeader()).map(([who]) => who);

  beforeAll(async () => {
    world = await WidgetWorld.create(testKubeConfig(), 'fw-leader');
  });
  afterAll(async () => {
    await Promise.all([...operators.values()].map((op) => op.stop()));
  });

  it('elects exactly one leader; only it runs handlers and leader-only work, every replica runs everyReplica daemons', async () => {
    await Promise.all([make('a').start(), make('b').start()]);
    await eventually(() => expect(leaders()).toHaveLength(1));
    const [leader] = leaders();
    await world.createWidget('w1');
    await eventually(() =>
      expect(log.filter((e) => e.what === 'handled' && e.name === 'w1')).toHaveLength(1),
    );
    await eventually(() =>
      expect(log.filter((e) => e.what === 'leader-timer').length).toBeGreaterThanOrEqual(2),
    );
    expect(new Set(log.filter((e) => e.what !== 'replica-daemon').map((e) => e.who))).toEqual(
      new Set([leader]),
    );
    expect(new Set(log.filter((e) => e.what === 'replica-daemon').map((e) => e.who))).toEqual(
      new Set(['a', 'b']),
    );
    expect(leaders()).toEqual([leader]);
  });

  it('lets the other replica take over within the lease duration when the leader dies without releasing', async () => {
    const [old] = leaders();
    const [survivor] = [...operators.keys()].filter((w) => w !== old);
    const killedAt = Date.now();
    await operators.get(old)!.kill();
    operators.delete(old);
    await eventually(() => expect(leaders()).toEqual([survivor]), 20_000);
    // Lease duration plus one retry period, with slack for a loaded machine.
    expect(Date.now() - killedAt).toBeLessThan(
      (LEASE.leaseDurationSeconds + LEASE.retryPeriodSeconds + 3) * 1000,
    );
    await world.createWidget('w2');
    await eventually(() =>
      expect(log.filter((e) => e.what === 'handled' && e.name === 'w2').map((e) => e.who)).toEqual([
        survivor,
      ]),
    );
  });

  it('releases the lease on graceful stop so a successor need not wait for it to expire', async () => {
    const [current] = leaders();
    await operators.get(current)!.stop();
    operators.delete(current);
    const lease = await world.client.request<{ spec: { holderIdentity?: string } }>(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/${world.namespace}/leases/fw-leader`,
    );
    expect(lease.spec.holderIdentity).toBeUndefined();
    const next = make('c');
    const startedAt = Date.now();
    await next.start();
    await eventually(() => expect(next.isLeader()).toBe(true));
    expect(Date.now() - startedAt).toBeLessThan(LEASE.leaseDurationSeconds * 1000);
  });
});
