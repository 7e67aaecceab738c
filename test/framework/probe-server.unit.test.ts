import { Counter, Registry } from 'prom-client';
import { ProbeServer } from '../../framework/core/probe-server.js';

describe('ProbeServer', () => {
  let ready = false;
  const registry = new Registry();
  new Counter({
    name: 'probe_test_total',
    help: 'a metric from the injected registry',
    registers: [registry],
  }).inc(3);
  const server = new ProbeServer(registry, () => ready);
  let base: string;

  beforeAll(async () => {
    const addr = await server.listen('127.0.0.1', 0);
    base = `http://127.0.0.1:${addr.port}`;
  });
  afterAll(() => server.close());

  it('answers /readyz 503 until the caches have synced, then 200', async () => {
    ready = false;
    expect((await fetch(`${base}/readyz`)).status).toBe(503);
    ready = true;
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
  });

  it.each([
    ['/healthz', 200],
    ['/healthz?verbose=1', 200],
    ['/nope', 404],
  ])('answers %s with %i', async (path, status) => {
    expect((await fetch(`${base}${path}`)).status).toBe(status);
  });

  it('serves the injected registry (and only it) on /metrics', async () => {
    const res = await fetch(`${base}/metrics`);
    expect(res.headers.get('content-type')).toBe(registry.contentType);
    const body = await res.text();
    expect(body).toContain('probe_test_total 3');
    expect(body).not.toContain('process_cpu'); // nothing from prom-client's global registry
  });
});
