// The direct check (no proxy) fetches a probe URL from the operator's own Pod; a probe URL is
// anyone's who may create a Proxy. With a guard it fetches nothing the guard refuses: the host
// as written (an address or a name such as localhost); every address a name resolves to is
// checked by the guarded lookup the probes use (test/health/address-guard.unit.test.ts).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkDirectly } from '../../health/direct-check.js';
import { endpointCheck, DEFAULT_EXTERNAL_ENDPOINTS } from '../../providers/endpoint-ranges.js';

let server: Server;
let port: number;
let requests = 0;
beforeAll(async () => {
  server = createServer((_req, res) => {
    requests++;
    res.writeHead(204).end();
  });
  await new Promise<void>((r) => server.listen(0, '::', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise((r) => server.close(r)));
beforeEach(() => (requests = 0));

const check = endpointCheck(DEFAULT_EXTERNAL_ENDPOINTS);
const guard = (host: string) => check(host)?.message;
const opts = { timeoutSeconds: 2, expectedStatusCodes: [204] };

describe('checkDirectly with the default endpoint rule', () => {
  it.each([
    ['an IPv4 loopback address', '127.0.0.1', 'loopback range'],
    ['an IPv6 loopback address', '[::1]', 'loopback range'],
    ['localhost, refused by name', 'localhost', 'a name of the loopback range'],
    ['the unspecified address', '0.0.0.0', 'unspecified range'],
  ])('refuses %s without a request', async (_case, host, named) => {
    const result = await checkDirectly(`http://${host}:${port}/`, { ...opts, guard });
    expect(result).toEqual({ reachable: false, refused: true, message: expect.stringContaining(named) });
    expect(requests).toBe(0);
  });

  it('the metadata address is refused before any connection is tried', async () => {
    const result = await checkDirectly('http://169.254.169.254/latest/meta-data/', { ...opts, guard });
    expect(result).toMatchObject({
      reachable: false,
      refused: true,
      message: expect.stringContaining('metadata'),
    });
  });

  it('localhost. (a trailing dot) is refused by name too, without a request', async () => {
    const result = await checkDirectly(`http://localhost.:${port}/`, { ...opts, guard });
    expect(result).toMatchObject({ reachable: false, refused: true });
    expect(requests).toBe(0);
  });

  it('without a guard (the control) the same URL is fetched', async () => {
    expect(await checkDirectly(`http://127.0.0.1:${port}/`, opts)).toEqual({ reachable: true });
    expect(requests).toBe(1);
  });
});
