// The handler-author examples of docs/framework.md. Regions between `#region` and
// `#endregion` are quoted in the page verbatim; test/framework/docs-examples.int.test.ts
// checks the quotes and runs this controller against a real API server.
import { inject } from 'tsyringe';
import {
  controller,
  daemon,
  onCreate,
  onDelete,
  onResume,
  onUpdate,
  PermanentError,
  TemporaryError,
  timer,
  watches,
  type CacheReader,
  type HandlerContext,
  type HandlerResult,
  type KubeObject,
} from '../../framework/index.js';
import {
  CONFIGMAP,
  GREETING,
  GROUP,
  SALUTATION_LABEL,
  type Greeting,
  type SalutationConfigMap,
} from './greeting-kind.js';

// #region settings
/** DI token and shape of the settings the entry point registers. */
export const GREETING_SETTINGS = Symbol('GreetingSettings');
export interface GreetingSettings {
  /** Seconds between the consistency checks of each Greeting. */
  checkSeconds: number;
}
// #endregion settings

// #region map
/** A salutation ConfigMap changed: the Greetings of its namespace that use it. */
function greetingsUsing(cm: KubeObject, cache: CacheReader) {
  return cache
    .list<Greeting>(GREETING, { namespace: cm.metadata.namespace })
    .filter((g) => g.spec.salutationFrom === cm.metadata.name)
    .map((g) => ({ namespace: g.metadata.namespace, name: g.metadata.name ?? '' }));
}
// #endregion map

function salutation(g: Greeting, cache: CacheReader): string | undefined {
  if (!g.spec.salutationFrom) return 'Hello';
  const cm = cache.get<SalutationConfigMap>(CONFIGMAP, g.metadata.namespace, g.spec.salutationFrom);
  return cm?.data?.salutation;
}

// #region controller
@controller({ ...GREETING, finalizer: `${GROUP}/farewell` })
@watches({ ...CONFIGMAP, labelSelector: `${SALUTATION_LABEL}=true`, map: greetingsUsing })
export class GreetingController {
  constructor(@inject(GREETING_SETTINGS) private readonly settings: GreetingSettings) {}

  /** Level-triggered: the same code for a new object, a new generation and a restart. */
  @onCreate()
  @onUpdate()
  @onResume()
  async greet(ctx: HandlerContext<Greeting>): Promise<void> {
    const g = ctx.object;
    if (!g.spec.name) throw new PermanentError('spec.name is required'); // no retry until the spec changes
    const words = salutation(g, ctx.cache);
    if (words === undefined) throw new TemporaryError(`ConfigMap ${g.spec.salutationFrom} not found`, 5);
    await ctx.status.patch({ message: `${words}, ${g.spec.name}!` }); // skipped when unchanged
  }

  /** Runs before the object goes: the finalizer holds it until this succeeds. */
  @onDelete()
  async farewell(ctx: HandlerContext<Greeting>): Promise<void> {
    await ctx.events.normal('Farewell', `Goodbye, ${ctx.object.spec.name ?? 'stranger'}`);
  }
  // #endregion controller

  // #region timer
  /** Every `checkSeconds` (from the settings): a stale message goes back to the work queue. */
  @timer({ interval: (_g, self: GreetingController) => self.settings.checkSeconds, jitter: 0.1 })
  async check(ctx: HandlerContext<Greeting>): Promise<HandlerResult | void> {
    const words = salutation(ctx.object, ctx.cache);
    const expected = words && ctx.object.spec.name ? `${words}, ${ctx.object.spec.name}!` : undefined;
    if (expected !== undefined && ctx.object.status?.message !== expected) return { requeueAfter: 0 };
  }
  // #endregion timer

  // #region daemon
  /** Runs beside the object's other handlers while it exists; stopped on deletion and shutdown. */
  @daemon({ backoff: 10 })
  async announce(ctx: HandlerContext<Greeting>): Promise<void> {
    ctx.logger.info('greeting is live');
    await ctx.stopped; // or: while (await ctx.sleep(ms)) { ... }
    ctx.logger.info('greeting stopped');
  }
  // #endregion daemon
}
