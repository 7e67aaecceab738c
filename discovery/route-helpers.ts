// Small pieces the routes share: the raw query string, 405 and lease_not_found answers, and
// the proxy a lease shows.
import type { Request, RequestHandler, Response } from 'express';
import type { ProxyCatalog, ProxyRecord } from '../book/catalog.js';
import type { Lease } from '../book/lease-store.js';
import { errorBody, sendError, type ApiErrorBody } from './api-error.js';

export function rawQuery(req: Request): string {
  const at = req.originalUrl.indexOf('?');
  return at === -1 ? '' : req.originalUrl.slice(at + 1);
}

export function methodNotAllowed(allow: string): RequestHandler {
  return (req, res) => {
    res.setHeader('Allow', allow);
    sendError(
      res,
      405,
      'method_not_allowed',
      `${req.method} is not allowed on ${req.path}; allowed: ${allow}`,
    );
  };
}

export function leaseNotFound(res: Response, id: string): void {
  const { error, message } = leaseNotFoundBody(id);
  sendError(res, 404, error, message);
}

export function leaseNotFoundBody(id: string): ApiErrorBody {
  return errorBody('lease_not_found', `lease '${id}' is unknown, expired or released`);
}

/**
 * The proxy as it is now; a lease outlives its proxy's deletion, and then shows the proxy as
 * it was when leased, marked unhealthy and Deleting.
 */
export function currentProxy(catalog: ProxyCatalog, lease: Lease): ProxyRecord {
  return catalog.get(lease.proxyID) ?? { ...lease.proxy, healthy: false, phase: 'Deleting' };
}
