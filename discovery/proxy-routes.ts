// GET /v1/proxies (the token's scope of the catalog, a page at a time) and
// GET /v1/proxies/{namespace}/{name} (one proxy, and why it can or cannot be leased now).
import type { Express } from 'express';
import type { ProxyRecord } from '../book/catalog.js';
import { leasability } from '../book/leasability.js';
import { sendError, sendJSON, sendTooManyRequests } from './api-error.js';
import type { ApiContext } from './api-context.js';
import { DEFAULT_MAX_CONCURRENT_LISTS, ListSlots } from './list-slots.js';
import type { PageBuffers } from './page-buffers.js';
import { ProxyListSerializer, toProxyView } from './proxy-view.js';
import { continueToken, parseListQuery, parseProxyQuery, type ListQuery } from './request-parsing.js';
import { methodNotAllowed, rawQuery } from './route-helpers.js';
import { visibleCooldowns } from './target-privacy.js';
import { TurnQueue } from './turn-queue.js';

export interface ProxyRoutesOptions {
  /** The pool list pages are written into (default: a pool of its own). */
  pageBuffers?: PageBuffers;
  /** Lists one token may have in flight; beyond it 429. */
  maxConcurrentLists?: number;
}

export function mountProxyRoutes(app: Express, ctx: ApiContext, options: ProxyRoutesOptions): void {
  const { catalog, leases, metrics, ledger, guard, owner, scopeOf } = ctx;
  const serializer = new ProxyListSerializer(options.pageBuffers);
  const listTurns = new TurnQueue();
  const listSlots = new ListSlots(options.maxConcurrentLists ?? DEFAULT_MAX_CONCURRENT_LISTS);

  app
    .route('/v1/proxies')
    .all(guard)
    .get(async (req, res) => {
      const query = parseListQuery(rawQuery(req));
      const who = owner(res);
      if (!listSlots.take(who)) {
        metrics.countThrottled(who);
        // A page takes milliseconds: the shortest Retry-After HTTP can say.
        sendTooManyRequests(
          res,
          0,
          (seconds) =>
            `token '${who}' already has ${listSlots.max} lists of /v1/proxies in flight (the most one token may have); retry after ${seconds} s`,
        );
        return;
      }
      try {
        // One page per loop iteration: the probes' timers run between any two (turn-queue.ts).
        await listTurns.turn();
        // A client that left while the page waited for its turn costs no page.
        if (res.destroyed) return;
        const admits = scopeOf(res);
        // A scoped token's list is the catalog's filtered again (one pass per page it asks).
        const all = catalog.list(query);
        const { items, next } = page(admits === undefined ? all : all.filter(admits), query);
        const usage = await leases.usage(items.map((p) => p.id));
        const body = serializer.list(items, usage, next === undefined ? undefined : continueToken(next));
        // The page's buffer is reused once the response is done with it: written, or cut off.
        res.once('close', () => serializer.release(body));
        sendJSON(res, 200, body);
      } finally {
        listSlots.release(who);
      }
    })
    .all(methodNotAllowed('GET, HEAD'));

  app
    .route('/v1/proxies/:namespace/:name')
    .all(guard)
    .get(async (req, res) => {
      const id = `${req.params.namespace}/${req.params.name}`;
      const proxy = catalog.get(id);
      const admits = scopeOf(res);
      // Outside the token's scope a proxy does not exist for it.
      if (proxy === undefined || (admits !== undefined && !admits(proxy))) {
        sendError(res, 404, 'proxy_not_found', `proxy '${id}' does not exist`);
        return;
      }
      const { target } = parseProxyQuery(rawQuery(req));
      // One read of the book for both the object and the explanation, so the two agree.
      const { usage, cooldowns, now } = await leases.standing(id);
      const who = owner(res);
      const visible = visibleCooldowns(cooldowns, who, target, (t) => ledger.reported(who, id, t));
      sendJSON(res, 200, {
        ...toProxyView(proxy, usage),
        ...leasability(proxy, usage, visible, now, target),
      });
    })
    .all(methodNotAllowed('GET, HEAD'));
}

/** One page of a sorted list: the records after `query.after`, and the id to continue after. */
export function page(
  records: readonly ProxyRecord[],
  query: Pick<ListQuery, 'limit' | 'after'>,
): { items: readonly ProxyRecord[]; next?: string } {
  let start = 0;
  if (query.after !== undefined) {
    // Records are sorted by id: the first one past `after`, whether or not it still exists.
    let hi = records.length;
    while (start < hi) {
      const mid = (start + hi) >>> 1;
      if (records[mid].id <= query.after) start = mid + 1;
      else hi = mid;
    }
  }
  const items = records.slice(start, start + query.limit);
  const more = start + query.limit < records.length;
  return more ? { items, next: items[items.length - 1].id } : { items };
}
