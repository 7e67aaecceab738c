// Ties the client's types (client/src/types.ts) to the /openapi.json the server serves: the
// same properties, the same required ones, the same enums, and every path the client calls
// documented. Each `…Shape` below must name exactly the keys of its type with their
// optionality (the compiler checks that), and the test compares it with the document.
import type {
  ApiErrorBody,
  ApiErrorCode,
  Lease,
  LeasedProxy,
  LeaseRequest,
  LeaseSession,
  Cooldown,
  NotLeasableCode,
  Proxy,
  ProxyDetail,
  ProxyList,
  ProxyStats,
  RenewRequest,
  BatchedReport,
  BatchedReportNotFound,
  ReportRequest,
  ReportResponse,
  ReportResult,
  ReportsResponse,
} from '../../client/src/index.js';
import { DiscoveryClient, MAX_BATCH_REPORTS } from '../../client/src/index.js';
import { proxy } from '../book/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from './discovery-server.js';

/** `required` for keys that must be present, `optional` for `key?:` (and `| undefined`) ones. */
type Shape<T> = { [K in keyof T]-?: undefined extends T[K] ? 'optional' : 'required' };
/** Every member of a string union, once (the compiler rejects a missing or unknown one). */
type Members<U extends string> = { [K in U]: true };

const proxyShape = {
  id: 'required',
  ip: 'required',
  port: 'required',
  attributes: 'required',
  phase: 'required',
  healthy: 'required',
  latencyMillis: 'required',
  exitIP: 'optional',
  activeLeases: 'required',
  maxLeases: 'required',
  stats: 'required',
  held: 'optional',
} as const satisfies Shape<Proxy>;
const proxyDetailShape = {
  ...proxyShape,
  leasable: 'required',
  target: 'required',
  reasons: 'required',
} as const satisfies Shape<ProxyDetail>;
const cooldownShape = {
  target: 'required',
  until: 'required',
  hidden: 'optional',
} as const satisfies Shape<Cooldown>;
const notLeasableCodes = {
  deleting: true,
  draining: true,
  leases_disabled: true,
  no_address: true,
  unhealthy: true,
  suspect: true,
  full: true,
  cooling_down: true,
} satisfies Members<NotLeasableCode>;
const statsShape = {
  windowSeconds: 'required',
  ok: 'required',
  banned: 'required',
  rate_limited: 'required',
  unreachable: 'required',
} as const satisfies Shape<ProxyStats>;
const leasedProxyShape = {
  id: 'required',
  ip: 'required',
  port: 'required',
  attributes: 'required',
  phase: 'required',
  healthy: 'required',
  latencyMillis: 'required',
  exitIP: 'optional',
  activeLeases: 'required',
  maxLeases: 'required',
  stats: 'required',
  held: 'optional',
  url: 'required',
  username: 'optional',
  password: 'optional',
} as const satisfies Shape<LeasedProxy>;
const leaseShape = {
  leaseID: 'required',
  proxy: 'required',
  expiresAt: 'required',
  target: 'required',
  session: 'optional',
} as const satisfies Shape<Lease>;
const leaseSessionShape = { key: 'required', moved: 'required' } as const satisfies Shape<LeaseSession>;
const leaseRequestShape = {
  selector: 'optional',
  exitIP: 'optional',
  ttlSeconds: 'optional',
  target: 'optional',
  session: 'optional',
  exclude: 'optional',
} as const satisfies Shape<LeaseRequest>;
const renewRequestShape = { ttlSeconds: 'optional' } as const satisfies Shape<RenewRequest>;
const reportRequestShape = {
  result: 'required',
  target: 'optional',
  retryAfterSeconds: 'optional',
  release: 'optional',
} as const satisfies Shape<ReportRequest>;
const reportResponseShape = {
  leaseID: 'required',
  proxyID: 'required',
  result: 'required',
  target: 'required',
  cooldownUntil: 'required',
  suspect: 'optional',
  capped: 'optional',
  released: 'optional',
} as const satisfies Shape<ReportResponse>;
const batchedReportShape = {
  leaseID: 'required',
  ...reportRequestShape,
} as const satisfies Shape<BatchedReport>;
const batchedReportNotFoundShape = {
  leaseID: 'required',
  error: 'required',
  message: 'required',
} as const satisfies Shape<BatchedReportNotFound>;
const reportsResponseShape = { items: 'required' } as const satisfies Shape<ReportsResponse>;
const proxyListShape = { items: 'required', continue: 'optional' } as const satisfies Shape<ProxyList>;
const errorShape = { error: 'required', message: 'required' } as const satisfies Shape<ApiErrorBody>;

const errorCodes = {
  invalid_request: true,
  invalid_json: true,
  unauthorized: true,
  not_found: true,
  lease_not_found: true,
  proxy_not_found: true,
  method_not_allowed: true,
  no_match: true,
  all_busy: true,
  all_cooling_down: true,
  payload_too_large: true,
  unsupported_media_type: true,
  headers_too_large: true,
  request_timeout: true,
  store_unavailable: true,
  outcome_unknown: true,
  too_many_requests: true,
  lease_quota: true,
  cooldown_quota: true,
  report_quota: true,
  book_queue_full: true,
  internal: true,
} satisfies Members<ApiErrorCode>;
const reportResults = {
  ok: true,
  banned: true,
  rate_limited: true,
  unreachable: true,
} satisfies Members<ReportResult>;

interface Schema {
  type?: string | string[];
  oneOf?: Schema[];
  maxItems?: number;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  $ref?: string;
}
interface Operation {
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { $ref?: string; content?: Record<string, { schema: Schema }> }>;
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

describe("the client's types against the served /openapi.json", () => {
  let server: TestDiscoveryServer;
  let doc: Document;

  beforeAll(async () => {
    server = await startDiscoveryServer({ proxies: [proxy('ns/a', { ip: '10.0.0.1' })] });
    doc = (await (await fetch(`${server.baseUrl}/openapi.json`)).json()) as Document;
  });
  afterAll(async () => {
    await server.stop();
  });

  /** Follows a $ref (and keeps the rest of the referring schema, as OpenAPI 3.1 does). */
  function resolve(schema: Schema | undefined): Schema {
    if (schema === undefined) throw new Error('no schema where the client expects one');
    if (schema.$ref === undefined) return schema;
    const { $ref, ...rest } = schema;
    return { ...resolve(doc.components.schemas[$ref.replace('#/components/schemas/', '')]), ...rest };
  }
  function operation(method: string, path: string): Operation {
    const op = doc.paths[path]?.[method];
    if (op === undefined) throw new Error(`${method.toUpperCase()} ${path} is not in the document`);
    return op;
  }
  const responseBody = (method: string, path: string, status: string) =>
    resolve(operation(method, path).responses[status]?.content?.['application/json']?.schema);
  const requestBody = (method: string, path: string) =>
    resolve(operation(method, path).requestBody?.content['application/json']?.schema);

  function expectShape(schema: Schema, shape: Record<string, 'required' | 'optional'>): void {
    const keys = Object.keys(shape).sort();
    expect(Object.keys(schema.properties ?? {}).sort()).toEqual(keys);
    expect([...(schema.required ?? [])].sort()).toEqual(keys.filter((k) => shape[k] === 'required'));
  }

  it.each([
    { type: 'ProxyList', where: () => responseBody('get', '/v1/proxies', '200'), shape: proxyListShape },
    {
      type: 'Proxy (list item)',
      where: () => resolve(responseBody('get', '/v1/proxies', '200').properties?.items?.items),
      shape: proxyShape,
    },
    {
      type: 'ProxyDetail (single)',
      where: () => responseBody('get', '/v1/proxies/{namespace}/{name}', '200'),
      shape: proxyDetailShape,
    },
    {
      type: 'Cooldown',
      where: () =>
        resolve(
          resolve(
            resolve(responseBody('get', '/v1/proxies/{namespace}/{name}', '200').properties?.reasons?.items)
              .properties?.cooldowns,
          ).items,
        ),
      shape: cooldownShape,
    },
    {
      type: 'ProxyStats',
      where: () => resolve(responseBody('get', '/v1/proxies/{namespace}/{name}', '200').properties?.stats),
      shape: statsShape,
    },
    { type: 'LeaseRequest', where: () => requestBody('post', '/v1/leases'), shape: leaseRequestShape },
    { type: 'Lease', where: () => responseBody('post', '/v1/leases', '201'), shape: leaseShape },
    {
      type: 'LeasedProxy',
      where: () => resolve(responseBody('post', '/v1/leases', '201').properties?.proxy),
      shape: leasedProxyShape,
    },
    {
      type: 'LeaseSession',
      where: () => resolve(responseBody('post', '/v1/leases', '201').properties?.session),
      shape: leaseSessionShape,
    },
    {
      type: 'RenewRequest',
      where: () => requestBody('post', '/v1/leases/{id}/renew'),
      shape: renewRequestShape,
    },
    {
      type: 'Lease (renewed)',
      where: () => responseBody('post', '/v1/leases/{id}/renew', '200'),
      shape: leaseShape,
    },
    {
      type: 'ReportRequest',
      where: () => requestBody('post', '/v1/leases/{id}/report'),
      shape: reportRequestShape,
    },
    {
      type: 'ReportResponse',
      where: () => responseBody('post', '/v1/leases/{id}/report', '200'),
      shape: reportResponseShape,
    },
    {
      type: 'BatchedReport',
      where: () => resolve(requestBody('post', '/v1/reports').properties?.reports?.items),
      shape: batchedReportShape,
    },
    {
      type: 'ReportsResponse',
      where: () => responseBody('post', '/v1/reports', '200'),
      shape: reportsResponseShape,
    },
    {
      type: 'ReportResponse (a batch item)',
      where: () =>
        resolve(resolve(responseBody('post', '/v1/reports', '200').properties?.items?.items).oneOf?.[0]),
      shape: reportResponseShape,
    },
    {
      type: 'BatchedReportNotFound (a batch item)',
      where: () =>
        resolve(resolve(responseBody('post', '/v1/reports', '200').properties?.items?.items).oneOf?.[1]),
      shape: batchedReportNotFoundShape,
    },
    { type: 'ApiErrorBody', where: () => resolve(doc.components.schemas.Error), shape: errorShape },
  ])('$type has the documented properties and required ones', ({ where, shape }) => {
    expectShape(where(), shape);
  });

  it.each([
    {
      type: 'ApiErrorCode',
      where: () => resolve(doc.components.schemas.Error).properties?.error,
      members: errorCodes,
    },
    {
      type: 'NotLeasableCode',
      where: () =>
        resolve(responseBody('get', '/v1/proxies/{namespace}/{name}', '200').properties?.reasons?.items)
          .properties?.code,
      members: notLeasableCodes,
    },
    {
      type: 'ReportResult',
      where: () => requestBody('post', '/v1/leases/{id}/report').properties?.result,
      members: reportResults,
    },
  ])('$type is exactly the documented enum', ({ where, members }) => {
    expect([...(resolve(where()).enum ?? [])].sort()).toEqual(Object.keys(members).sort());
  });

  it("MAX_BATCH_REPORTS is the document's cap on a batch", () => {
    expect(requestBody('post', '/v1/reports').properties?.reports?.maxItems).toBe(MAX_BATCH_REPORTS);
  });

  it('calls only documented operations', async () => {
    const client = new DiscoveryClient({ baseUrl: server.baseUrl });
    const lease = await client.lease({ session: 's1', target: 'example.com' });
    await client.listProxies({ selector: { geo: 'x' }, healthy: true });
    await client.getProxy('ns/a', { target: 'example.com' });
    await client.renew(lease.leaseID);
    await client.report(lease.leaseID, 'ok');
    await client.reportMany([{ leaseID: lease.leaseID, result: 'ok' }]);
    await client.release(lease.leaseID);
    await client.endSession('s1');
    const templates = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => ({
        method: method.toUpperCase(),
        pattern: new RegExp(`^${path.replace(/\{\w+\}/g, '[^/]+').replace(/\./g, '\\.')}$`),
      })),
    );
    const calls = server.requests.map((r) => r.call).filter((c) => c !== 'GET /openapi.json');
    expect(calls).toHaveLength(8);
    for (const call of calls) {
      const [method, path] = call.split(' ');
      expect({
        call,
        documented: templates.some((t) => t.method === method && t.pattern.test(path)),
      }).toEqual({
        call,
        documented: true,
      });
    }
  });
});
