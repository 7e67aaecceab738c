// A front of the real discovery API for the Scrapy crawls: it passes every call through, and
// can answer reports late (a slow or loaded API) or answer lease asks itself with an error the
// real API sends (503 store_unavailable, 429 lease_quota) while a fault is on.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errorBody, type ApiErrorCode } from '../../discovery/api-error.js';

export interface ApiFault {
  status: number;
  code: ApiErrorCode;
  message: string;
  retryAfterSeconds: number;
}

export interface ApiFront {
  baseUrl: string;
  /** From now on every lease ask (POST /v1/leases) gets `fault`; undefined passes them again. */
  failLeases(fault: ApiFault | undefined): void;
  /** Lease asks answered with the fault so far. */
  failed: number;
  stop(): Promise<void>;
}

export async function startApiFront(
  baseUrl: string,
  options: { reportDelayMs?: number } = {},
): Promise<ApiFront> {
  let fault: ApiFault | undefined;
  /** Calls held back (a late report): dropped at stop, so no timer outlives the front. */
  const held = new Set<NodeJS.Timeout>();
  const front = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]!;
      if (fault && req.method === 'POST' && path === '/v1/leases') {
        state.failed++;
        res
          .writeHead(fault.status, {
            'content-type': 'application/json',
            'retry-after': String(fault.retryAfterSeconds),
          })
          .end(JSON.stringify(errorBody(fault.code, fault.message)));
        return;
      }
      const body = Buffer.concat(chunks);
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(([name]) => name !== 'host' && name !== 'content-length'),
      ) as Record<string, string>;
      const wait = /\/report$/.test(path) ? (options.reportDelayMs ?? 0) : 0;
      const timer = setTimeout(() => {
        held.delete(timer);
        fetch(`${baseUrl}${req.url}`, { method: req.method, headers, ...(body.length ? { body } : {}) })
          .then(async (answer) => {
            const type = answer.headers.get('content-type');
            res.writeHead(answer.status, type ? { 'content-type': type } : {});
            res.end(Buffer.from(await answer.arrayBuffer()));
          })
          .catch(() => res.destroy());
      }, wait);
      held.add(timer);
    });
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  const state: ApiFront = {
    baseUrl: `http://127.0.0.1:${(front.address() as AddressInfo).port}`,
    failLeases: (next) => void (fault = next),
    failed: 0,
    stop: () => {
      for (const timer of held) clearTimeout(timer);
      front.closeAllConnections();
      return new Promise<void>((resolve) => front.close(() => resolve()));
    },
  };
  return state;
}
