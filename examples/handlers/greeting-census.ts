// An operator-wide @background class (docs/framework.md, "Background work").
import { background, daemon, onStartup, type OperatorContext } from '../../framework/index.js';
import { GREETING } from './greeting-kind.js';

// #region background
@background()
export class GreetingCensus {
  count = 0;

  @onStartup()
  announce(ctx: OperatorContext): void {
    ctx.logger.info('census starting'); // runs after the caches are filled, before leading
  }

  /** Leader-only by default; `@daemon({ everyReplica: true })` runs on every replica. */
  @daemon()
  async census(ctx: OperatorContext): Promise<void> {
    do this.count = ctx.cache.list(GREETING).length;
    while (await ctx.sleep(500)); // false once stopped: leadership lost or shutdown
  }
}
// #endregion background
