// Holds discovery/openapi.ts against the implementation: the same routes both ways, and real
// responses that carry documented status codes and validate against the documented schemas.
import type { Express } from 'express';
import { Registry } from 'prom-client';
import { createDiscoveryApp } from '../../discovery/app.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { connectRedis } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { openApiDocument, type OperationObject, type SchemaObject } from '../../discovery/openapi.js';
import { startHarness, type CallOptions, type CallResult, type Harness } from './api-harness.js';
import { TestCatalog, proxy, silentLogger } from '../book/fixtures.js';
import { validate } from './schema-validator.js';

const TOKEN = 'openapi-test-token';
const auth = { authorization: `Bearer ${TOKEN}` };
const { schemas } = openApiDocument.components;

function documentedRoutes(): string[] {
  return Object.entries(openApiDocument.paths).flatMap(([path, operations]) =>
    Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
  );
}

/** Routes registered on the express router, with :params written as OpenAPI {params}. */
function implementedRoutes(app: Express): string[] {
  return app.router.stack.flatMap((layer) => {
    if (layer.route === undefined) return [];
    const path = layer.route.path.replace(/:(\w+)/g, '{$1}');
    const methods = Object.keys((layer.route as unknown as { methods: Record<string, boolean> }).methods);
    return methods.filter((method) => method !== '_all').map((method) => `${method.toUpperCase()} ${path}`);
  });
}

/** The documented operation a concrete request path hits, if any. */
function operationFor(
  method: string,
  path: string,
): { template: string; operation: OperationObject } | undefined {
  const bare = path.split('?')[0];
  for (const [template, operations] of Object.entries(openApiDocument.paths)) {
    const pattern = new RegExp(`^${template.replace(/\{\w+\}/g, '[^/]+').replace(/\./g, '\\.')}$`);
    const operation = operations[method.toLowerCase()];
    if (pattern.test(bare) && operation !== undefined) return { template, operation };
  }
  return undefined;
}

function responseSchema(
  operation: OperationObject,
  status: number,
): SchemaObject | undefined | 'undocumented' {
  const documented = operation.responses[String(status)];
  if (documented === undefined) return 'undocumented';
  const response =
    '$ref' in documented
      ? openApiDocument.components.responses[documented.$ref.replace('#/components/responses/', '')]
      : documented;
  return response.content?.['application/json']?.schema;
}

describe('the OpenAPI document', () => {
  it('documents exactly the routes the app implements', () => {
    const catalog = new TestCatalog();
    const app = createDiscoveryApp({
      catalog,
      leases: new MemoryLeaseStore({ catalog, logger: silentLogger }),
      logger: silentLogger,
      registry: new Registry(),
      token: TOKEN,
    });
    expect(implementedRoutes(app).sort()).toEqual(documentedRoutes().sort());
  });

  it('derives LeasedProxy from Proxy: the same fields plus url and the optional credentials', () => {
    const { Proxy, LeasedProxy } = schemas;
    expect(LeasedProxy).toEqual({
      ...Proxy,
      required: [...Proxy.required!, 'url'],
      properties: {
        ...Proxy.properties,
        url: expect.objectContaining({ type: 'string' }),
        username: expect.objectContaining({ type: 'string' }),
        password: expect.objectContaining({ type: 'string' }),
      },
    });
  });

  it('resolves every $ref', () => {
    const refs = JSON.stringify(openApiDocument).match(/"\$ref":"[^"]+"/g) ?? [];
    for (const ref of refs) {
      const [, kind, name] = /#\/components\/(\w+)\/(\w+)/.exec(ref)!;
      expect(openApiDocument.components[kind as 'schemas' | 'responses'][name]).toBeDefined();
    }
  });

  describe('against real responses', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness({
        token: TOKEN,
        proxies: [
          proxy('ns/a', { maxLeases: 1, attributes: { geo: 'eu' } }),
          proxy('ns/b', { healthy: false, ip: '' }),
        ],
      });
    });
    afterAll(async () => {
      await h.stop();
    });

    const seen = new Set<string>();
    async function check(
      method: string,
      path: string,
      options: CallOptions = {},
      via?: Harness,
    ): Promise<CallResult> {
      const response = await (via ?? h).call(method, path, {
        ...options,
        headers: { ...auth, ...options.headers },
      });
      const hit = operationFor(method, path);
      expect(hit).toBeDefined();
      const schema = responseSchema(hit!.operation, response.status);
      if (schema === 'undocumented')
        throw new Error(`${method} ${path} answered undocumented ${response.status}: ${response.text}`);
      seen.add(`${method} ${hit!.template} ${response.status}`);
      if (schema === undefined) expect(response.text).toBe('');
      else expect(validate(response.body, schema, schemas)).toEqual([]);
      return response;
    }

    it('every documented status code of every operation occurs and validates', async () => {
      const big = JSON.stringify({ selector: { k: 'x'.repeat(20_000) } });
      const klingon = { 'content-type': 'application/json; charset=klingon' };
      await check('GET', '/openapi.json');
      await check('GET', '/v1/proxies');
      await check('GET', '/v1/proxies?attr.geo=eu&healthy=true');
      await check('GET', '/v1/proxies?exitIP=203.0.113.0/24');
      await check('GET', '/v1/proxies?exitIP=203.0.113.7/24');
      await check('GET', '/v1/proxies?bogus=1');
      // A page that is not the last carries `continue`.
      const first = await check('GET', '/v1/proxies?limit=1');
      expect(first.body).toMatchObject({ items: [{ id: 'ns/a' }], continue: expect.any(String) });
      const cont = (first.body as { continue: string }).continue;
      const second = await check('GET', `/v1/proxies?limit=1&continue=${cont}`);
      expect(second.body).toEqual({ items: [expect.objectContaining({ id: 'ns/b' })] });
      await check('GET', '/v1/proxies?continue=bm9wZQ');
      await check('GET', '/v1/proxies', { headers: { authorization: 'Bearer wrong' } });
      const granted = await check('POST', '/v1/leases', {
        body: { selector: { geo: 'eu' }, ttlSeconds: 60, target: 'example.com' },
      });
      const leaseID = (granted.body as { leaseID: string }).leaseID;
      await check('POST', '/v1/leases', { body: {} });
      await check('POST', '/v1/leases', { body: { ttlSeconds: 'x' } });
      await check('POST', '/v1/leases', { body: {}, headers: { authorization: 'Bearer wrong' } });
      await check('POST', '/v1/leases', { rawBody: big });
      await check('POST', '/v1/leases', { rawBody: '{}', headers: klingon });
      await check('POST', `/v1/leases/${leaseID}/report`, { body: { result: 'rate_limited' } });
      await check('POST', `/v1/leases/${leaseID}/report`, { body: { result: 'ok' } });
      await check('POST', `/v1/leases/${leaseID}/report`, { body: { result: 'nope' } });
      await check('POST', `/v1/leases/${leaseID}/report`, {
        body: {},
        headers: { authorization: 'Bearer wrong' },
      });
      await check('POST', '/v1/leases/unknown/report', { body: { result: 'ok' } });
      await check('POST', `/v1/leases/${leaseID}/report`, { rawBody: big });
      await check('POST', `/v1/leases/${leaseID}/report`, { rawBody: '{}', headers: klingon });
      const batch = await check('POST', '/v1/reports', {
        body: {
          reports: [
            { leaseID, result: 'ok' },
            { leaseID: 'unknown', result: 'banned' },
          ],
        },
      });
      expect((batch.body as { items: unknown[] }).items).toEqual([
        expect.objectContaining({ leaseID, result: 'ok' }),
        expect.objectContaining({ leaseID: 'unknown', error: 'lease_not_found' }),
      ]);
      await check('POST', '/v1/reports', { body: { reports: [] } });
      await check('POST', '/v1/reports', {
        body: { reports: [] },
        headers: { authorization: 'Bearer wrong' },
      });
      await check('POST', '/v1/reports', { rawBody: big });
      await check('POST', '/v1/reports', { rawBody: '{}', headers: klingon });
      await check('DELETE', `/v1/leases/${leaseID}`);
      await check('DELETE', `/v1/leases/${leaseID}`); // released already: 404
      await check('DELETE', '/v1/leases/%E0%A4%A');
      await check('DELETE', `/v1/leases/${leaseID}`, { headers: { authorization: 'Bearer wrong' } });
      await check('GET', '/v1/proxies/ns/a');
      await check('GET', '/v1/proxies/ns/nope');
      await check('GET', '/v1/proxies/ns/%E0%A4%A');
      await check('GET', '/v1/proxies/ns/a', { headers: { authorization: 'Bearer wrong' } });
      const inSession = await check('POST', '/v1/leases', { body: { session: 'crawl-1', ttlSeconds: 60 } });
      const sessionLease = (inSession.body as { leaseID: string }).leaseID;
      await check('POST', `/v1/leases/${sessionLease}/renew`, { body: { ttlSeconds: 120 } });
      await check('POST', `/v1/leases/${sessionLease}/renew`, { body: { ttlSeconds: 0 } });
      await check('POST', `/v1/leases/${sessionLease}/renew`, {
        body: {},
        headers: { authorization: 'Bearer wrong' },
      });
      await check('POST', '/v1/leases/unknown/renew', {});
      await check('POST', `/v1/leases/${sessionLease}/renew`, { rawBody: big });
      await check('POST', `/v1/leases/${sessionLease}/renew`, { rawBody: '{}', headers: klingon });
      await check('DELETE', '/v1/sessions/crawl-1');
      await check('DELETE', '/v1/sessions/not%20valid');
      await check('DELETE', '/v1/sessions/crawl-1', { headers: { authorization: 'Bearer wrong' } });
      await check('DELETE', `/v1/leases/${sessionLease}`);

      // A shared store that cannot be reached (a Redis store whose Redis is not there): every
      // call on the book answers 503 store_unavailable.
      const redis = connectRedis({ url: `redis://127.0.0.1:${await freePort()}`, logger: silentLogger });
      const unreachable = await startHarness({
        token: TOKEN,
        proxies: [proxy('ns/a')],
        wrapStore: () =>
          new RedisLeaseStore({ redis, catalog: new TestCatalog([proxy('ns/a')]), logger: silentLogger }),
      });
      try {
        for (const [method, path, body] of [
          ['GET', '/v1/proxies', undefined],
          ['GET', '/v1/proxies/ns/a', undefined],
          ['POST', '/v1/leases', {}],
          ['POST', '/v1/leases/some-lease/renew', {}],
          ['POST', '/v1/leases/some-lease/report', { result: 'ok' }],
          ['POST', '/v1/reports', { reports: [{ leaseID: 'some-lease', result: 'ok' }] }],
          ['DELETE', '/v1/leases/some-lease', undefined],
          ['DELETE', '/v1/sessions/crawl-1', undefined],
        ] as const) {
          const response = await check(method, path, body === undefined ? {} : { body }, unreachable);
          expect([response.status, response.headers['retry-after']]).toEqual([503, '1']);
        }
      } finally {
        await unreachable.stop();
        redis.disconnect();
      }

      // A token over its rate limit: every /v1 operation answers 429 with Retry-After.
      const limited = await startHarness({
        token: TOKEN,
        proxies: [proxy('ns/a')],
        rateLimit: { ratePerSecond: 0.001, burst: 1 },
      });
      try {
        await check('GET', '/v1/proxies', {}, limited);
        for (const [method, path, body] of [
          ['GET', '/v1/proxies', undefined],
          ['GET', '/v1/proxies/ns/a', undefined],
          ['POST', '/v1/leases', {}],
          ['POST', '/v1/leases/some-lease/renew', {}],
          ['POST', '/v1/leases/some-lease/report', { result: 'ok' }],
          ['POST', '/v1/reports', { reports: [{ leaseID: 'some-lease', result: 'ok' }] }],
          ['DELETE', '/v1/leases/some-lease', undefined],
          ['DELETE', '/v1/sessions/crawl-1', undefined],
        ] as const) {
          const response = await check(method, path, body === undefined ? {} : { body }, limited);
          expect(response.status).toBe(429);
          expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        }
      } finally {
        await limited.stop();
      }

      const documented = Object.entries(openApiDocument.paths).flatMap(([path, operations]) =>
        Object.entries(operations).flatMap(([method, operation]) =>
          Object.keys(operation.responses).map((status) => `${method.toUpperCase()} ${path} ${status}`),
        ),
      );
      expect([...seen].sort()).toEqual(documented.sort());
    });

    it.each([
      ['GET', '/nowhere', 'NotFound', 404],
      ['PUT', '/v1/proxies', 'MethodNotAllowed', 405],
    ])('%s %s answers the shared %s response', async (method, path, name, status) => {
      const response = await h.call(method, path, { headers: auth });
      expect(response.status).toBe(status);
      const schema = openApiDocument.components.responses[name].content!['application/json'].schema;
      expect(validate(response.body, schema, schemas)).toEqual([]);
    });

    it('serves this very document', async () => {
      expect((await h.call('GET', '/openapi.json')).body).toEqual(
        JSON.parse(JSON.stringify(openApiDocument)),
      );
    });
  });
});

describe('the schema validator used above', () => {
  it.each<[unknown, SchemaObject, number]>([
    [{ error: 'no_match', message: 'x' }, { $ref: '#/components/schemas/Error' }, 0],
    [{ error: 'no_match' }, { $ref: '#/components/schemas/Error' }, 1],
    [{ error: 'nope', message: 'x' }, { $ref: '#/components/schemas/Error' }, 1],
    [{ error: 'no_match', message: 'x', extra: 1 }, { $ref: '#/components/schemas/Error' }, 1],
    [{ items: [{ id: 'x' }] }, { $ref: '#/components/schemas/ProxyList' }, 9],
    ['2026-01-01T00:00:00.000Z', { type: 'string', format: 'date-time' }, 0],
    ['yesterday', { type: 'string', format: 'date-time' }, 1],
    [1.5, { type: 'integer' }, 1],
    [null, { type: ['string', 'null'] }, 0],
  ])('%j against %j → %i errors', (value, schema, count) => {
    expect(validate(value, schema, schemas)).toHaveLength(count);
  });
});
