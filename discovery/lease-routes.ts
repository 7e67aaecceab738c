// POST /v1/leases (a lease, within the token's scope and quotas), DELETE /v1/leases/{id},
// POST /v1/leases/{id}/renew and DELETE /v1/sessions/{key}.
import type { Express } from 'express';
import type { NoLeaseReason } from '../book/lease-store.js';
import { StoreUnavailableError } from '../book/store-unavailable.js';
import { sendError, sendJSON } from './api-error.js';
import type { ApiContext } from './api-context.js';
import { toLeaseView } from './proxy-view.js';
import {
  parseLeaseBody,
  parseRenewBody,
  parseRequestID,
  parseSessionKey,
  REQUEST_ID_HEADER,
} from './request-parsing.js';
import { currentProxy, leaseNotFound, methodNotAllowed } from './route-helpers.js';

export function mountLeaseRoutes(app: Express, ctx: ApiContext): void {
  const {
    catalog,
    leases,
    metrics,
    ledger,
    quotas,
    reportLog,
    limits,
    clock,
    guard,
    body,
    owner,
    scopeOf,
    quotaRefusal,
  } = ctx;

  app
    .route('/v1/leases')
    .all(guard)
    .post(body, async (req, res) => {
      const request = parseLeaseBody(req.body, limits);
      const requestID = parseRequestID(req.headers[REQUEST_ID_HEADER]);
      const who = owner(res);
      // A new session at the token's quota ends the token's own least recently used one.
      const evict =
        request.session === undefined ? undefined : ledger.useSession(who, request.session, clock());
      if (evict !== undefined) {
        await leases.endSession(evict, who);
        metrics.countQuota(who, 'session');
      }
      const admits = scopeOf(res);
      const result = await leases
        .acquire({
          ...request,
          owner: who,
          // The book judges the lease quota with the grant: one count for every replica and door.
          leaseQuota: quotas.leases,
          ...(admits === undefined ? {} : { within: admits }),
          ...(requestID === undefined ? {} : { requestID }),
        })
        .catch((err: unknown) => {
          // A 503 is a lease request's outcome too: the alert on store trouble counts them.
          if (err instanceof StoreUnavailableError) metrics.countLeaseRequest('store_unavailable');
          throw err;
        });
      if (!result.granted && result.reason === 'lease_quota') {
        quotaRefusal(
          res,
          'lease_quota',
          `token '${who}' holds ${quotas.leases} live leases (its quota); release or let one expire first`,
          1,
        );
        return;
      }
      if (!result.granted) {
        metrics.countLeaseRequest(result.reason);
        // When the first cooldown ends: a client can wait exactly that long instead of polling.
        if (result.retryAfterMs !== undefined) {
          res.setHeader('Retry-After', String(Math.max(1, Math.ceil(result.retryAfterMs / 1000))));
        }
        sendError(
          res,
          409,
          result.reason,
          noLeaseMessage(result.reason, request.selector, request.target, request.exitIP?.text),
        );
        return;
      }
      // A repeat of a request id is the first grant again: counted once.
      if (result.replayed !== true) metrics.countLeaseRequest('granted');
      const { lease, usage, session } = result;
      if (session?.moved) {
        reportLog.record(
          'session_moved',
          { owner: owner(res), session: session.key, proxyID: lease.proxyID },
          'session moved to another proxy',
        );
      }
      sendJSON(res, 201, toLeaseView(lease, lease.proxy, usage, session));
    })
    .all(methodNotAllowed('POST'));

  app
    .route('/v1/leases/:id')
    .all(guard)
    .delete(async (req, res) => {
      const who = owner(res);
      const requestID = parseRequestID(req.headers[REQUEST_ID_HEADER]);
      // Another token's lease is unknown to this one: 404, as renew and report answer.
      if (await leases.release(req.params.id, who, requestID)) res.status(204).end();
      else leaseNotFound(res, req.params.id);
    })
    .all(methodNotAllowed('DELETE'));

  app
    .route('/v1/leases/:id/renew')
    .all(guard)
    .post(body, async (req, res) => {
      const { ttlSeconds } = parseRenewBody(req.body, limits);
      const requestID = parseRequestID(req.headers[REQUEST_ID_HEADER]);
      const who = owner(res);
      const renewed = await leases.renew(req.params.id, ttlSeconds, who, requestID);
      if (renewed === undefined) {
        leaseNotFound(res, req.params.id);
        return;
      }
      const { lease, usage } = renewed;
      const session = lease.session === undefined ? undefined : { key: lease.session, moved: false };
      sendJSON(res, 200, toLeaseView(lease, currentProxy(catalog, lease), usage, session));
    })
    .all(methodNotAllowed('POST'));

  app
    .route('/v1/sessions/:key')
    .all(guard)
    .delete(async (req, res) => {
      const key = parseSessionKey(req.params.key, 'session key');
      ledger.sessionEnded(owner(res), key);
      await leases.endSession(key, owner(res));
      res.status(204).end();
    })
    .all(methodNotAllowed('DELETE'));
}

function noLeaseMessage(
  reason: NoLeaseReason,
  selector: Record<string, string>,
  target?: string,
  exitIP?: string,
): string {
  const what = `proxies matching selector ${JSON.stringify(selector)}${exitIP === undefined ? '' : ` with an exit IP in ${exitIP}`}`;
  switch (reason) {
    case 'no_match':
      return `no healthy, leasable ${what}`;
    case 'all_busy':
      return `all ${what} are at their maxLeases; retry after a lease is released or expires`;
    case 'all_cooling_down':
      return `all ${what} are cooling down for ${target === undefined ? 'the global pool' : `target '${target}'`} after rate_limited/banned reports`;
  }
}
