import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { AddressRefusedError, guardedLookup, type AddressGuard } from './proxy-wire.js';

/**
 * What fetching a probe URL directly (no proxy) said. `refused`: not fetched, its host (or an
 * address its name resolved to) is one the guard refuses; no request left the operator.
 */
export type DirectCheck = { reachable: true } | { reachable: false; message: string; refused?: true };

export interface DirectCheckOptions {
  timeoutSeconds: number;
  expectedStatusCodes: readonly number[];
  /** Extra trust for the target's certificate (tests); production uses the system CAs. */
  ca?: string | Buffer | Array<string | Buffer>;
  signal?: AbortSignal;
  /**
   * Hosts and addresses the operator must not fetch from (the External endpoints' rule): a
   * probe URL is anyone's who may create a Proxy, and this fetch leaves from the operator's
   * own Pod. The host is checked as written, a name's every address before connecting.
   */
  guard?: AddressGuard;
}

/**
 * Fetches `url` from the operator itself, not through a proxy: the reference the autopilot
 * needs before it condemns proxies that fail their probes. If the target fails here too, the
 * cause is shared (the target, or the operator's own egress or DNS), not the proxies'.
 */
export function checkDirectly(url: string, opts: DirectCheckOptions): Promise<DirectCheck> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: DirectCheck) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(result);
    };
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      resolve({ reachable: false, message: `not a URL: ${JSON.stringify(url)}` });
      return;
    }
    const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    const literalRefusal = opts.guard?.(host);
    if (literalRefusal !== undefined) {
      resolve({ reachable: false, refused: true, message: `endpoint refused: ${literalRefusal}` });
      return;
    }
    const send = parsed.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(
      parsed,
      {
        method: 'GET',
        headers: { 'user-agent': 'proxy-operator-direct-check' },
        ca: opts.ca,
        agent: false,
        ...(opts.guard === undefined ? {} : { lookup: guardedLookup(opts.guard) }),
      },
      (res) => {
        const status = res.statusCode ?? 0;
        res.resume();
        done(
          opts.expectedStatusCodes.includes(status)
            ? { reachable: true }
            : { reachable: false, message: `answered ${status}` },
        );
      },
    );
    const timer = setTimeout(
      () => done({ reachable: false, message: `no answer within ${opts.timeoutSeconds} s` }),
      opts.timeoutSeconds * 1000,
    );
    req.on('error', (err) =>
      done(
        err instanceof AddressRefusedError
          ? { reachable: false, refused: true, message: err.message }
          : { reachable: false, message: err.message },
      ),
    );
    opts.signal?.addEventListener('abort', () => done({ reachable: false, message: 'aborted' }), {
      once: true,
    });
    req.end();
  });
}
