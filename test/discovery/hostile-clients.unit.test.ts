// Slow, oversized and wrong-protocol clients over raw sockets, against the real app and server:
// each gets the API's JSON error quickly, within a documented bound, and loses its connection.
import { connect } from 'node:net';
import { openApiDocument } from '../../discovery/openapi.js';
import { clientErrorReply } from '../../discovery/server.js';
import { startHarness, type Harness } from './api-harness.js';
import { proxy } from '../book/fixtures.js';
import { validate } from './schema-validator.js';

const HEADERS_TIMEOUT_MS = 600;
const REQUEST_TIMEOUT_MS = 1200;
// Node checks the two timeouts on a tick of min(1 s, headers timeout / 2).
const TICK_MS = HEADERS_TIMEOUT_MS / 2;
// The 413 cases' server waits this long for a body, and their client gives up far sooner: a
// server that waited for the body is caught by who closed the connection, not by a clock
// (a loaded CI machine stalled a wall-clock bound of 600 ms once).
const PATIENT_REQUEST_TIMEOUT_MS = 120_000;
const IMPATIENT_CLIENT_MS = 15_000;

interface Exchange {
  status: number | undefined;
  headers: Record<string, string>;
  body: unknown;
  /** Milliseconds from the first byte sent to the connection closing. */
  elapsedMs: number;
  /** Who ended the exchange: the server closing, or the client giving up after `giveUpMs`. */
  closedBy: 'server' | 'client';
}

/**
 * Sends `parts` (a string is sent at once; a number pauses that many ms), keeps the socket
 * open, and resolves when the server closes it (or after `giveUpMs`, status undefined).
 */
function exchange(port: number, parts: (string | number)[], giveUpMs = 20_000): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    let received = '';
    const started = performance.now();
    const socket = connect(port, '127.0.0.1', async () => {
      for (const part of parts) {
        if (socket.destroyed) return;
        if (typeof part === 'number') await new Promise((r) => setTimeout(r, part));
        else socket.write(part);
      }
    });
    let gaveUp = false;
    const giveUp = setTimeout(() => {
      gaveUp = true;
      socket.destroy();
    }, giveUpMs);
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // The server may close while we still write (we sent more than it wanted).
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    socket.on('close', () => {
      clearTimeout(giveUp);
      const elapsedMs = performance.now() - started;
      const [head, ...rest] = received.split('\r\n\r\n');
      const lines = head.split('\r\n');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(lines[0] ?? '')?.[1];
      const headers = Object.fromEntries(
        lines.slice(1).map((line) => {
          const at = line.indexOf(':');
          return [line.slice(0, at).toLowerCase(), line.slice(at + 1).trim()];
        }),
      );
      const text = rest.join('\r\n\r\n');
      resolve({
        status: status === undefined ? undefined : Number(status),
        headers,
        body: text === '' ? undefined : (JSON.parse(text) as unknown),
        elapsedMs,
        closedBy: gaveUp ? 'client' : 'server',
      });
    });
  });
}

function sharedSchema(name: string) {
  return openApiDocument.components.responses[name].content!['application/json'].schema;
}

describe('hostile clients', () => {
  let h: Harness;
  /** The same app with request and keep-alive timeouts far beyond the 413 cases' client patience. */
  let patient: Harness;
  beforeAll(async () => {
    h = await startHarness({
      proxies: [proxy('ns/a')],
      server: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS },
    });
    patient = await startHarness({
      proxies: [proxy('ns/a')],
      server: {
        headersTimeoutMs: HEADERS_TIMEOUT_MS,
        requestTimeoutMs: PATIENT_REQUEST_TIMEOUT_MS,
        keepAliveTimeoutMs: PATIENT_REQUEST_TIMEOUT_MS,
      },
    });
  });
  afterAll(async () => {
    await h.stop();
    await patient.stop();
  });

  const post = (headers: string) =>
    `POST /v1/leases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${headers}\r\n`;

  it('413 for a declared Content-Length above the limit, the server closing without waiting for the body', async () => {
    const result = await exchange(
      patient.server.port,
      [post('Content-Length: 10000000\r\n'), '{"sel'],
      IMPATIENT_CLIENT_MS,
    );
    expect(result.status).toBe(413);
    expect(result.headers.connection).toBe('close');
    expect(result.body).toEqual({ error: 'payload_too_large', message: 'request body exceeds 16kb' });
    expect(
      validate(result.body, sharedSchema('PayloadTooLarge'), openApiDocument.components.schemas),
    ).toEqual([]);
    // The server closed long before its request timeout: nothing waited for the ten megabytes never sent.
    expect(result.closedBy).toBe('server');
  });

  it('413 once a chunked body grows past the limit, the server closing without waiting for its end', async () => {
    const chunk = 'x'.repeat(4096);
    const chunks = Array.from({ length: 5 }, () => `${(4096).toString(16)}\r\n${chunk}\r\n`);
    const result = await exchange(
      patient.server.port,
      [post('Transfer-Encoding: chunked\r\n'), ...chunks],
      IMPATIENT_CLIENT_MS,
    );
    expect(result.status).toBe(413);
    expect(result.body).toMatchObject({ error: 'payload_too_large' });
    expect(result.closedBy).toBe('server');
  });

  it('a body just under the limit is still read and answered', async () => {
    const body = JSON.stringify({ selector: { k: 'x'.repeat(16 * 1024 - 40) } });
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(16 * 1024);
    const result = await exchange(h.server.port, [
      `${post(`Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n`)}${body}`,
    ]);
    expect(result.status).toBe(409);
  });

  it.each<[string, (string | number)[], number]>([
    [
      'headers that trickle in and never finish',
      ['GET /v1/proxies HTTP/1.1\r\n', 200, 'Host: x\r\n', 200, 'X-A: 1\r\n'],
      HEADERS_TIMEOUT_MS,
    ],
    [
      'a body that trickles in and never finishes',
      [post('Content-Length: 100\r\n'), 100, '{"selector"', 200, ':{'],
      REQUEST_TIMEOUT_MS,
    ],
  ])('408 with the JSON error for %s, within the documented bound', async (_case, parts, bound) => {
    const result = await exchange(h.server.port, parts);
    expect(result.status).toBe(408);
    expect(result.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(result.body).toEqual({ error: 'request_timeout', message: expect.stringContaining('within') });
    expect(validate(result.body, sharedSchema('RequestTimeout'), openApiDocument.components.schemas)).toEqual(
      [],
    );
    expect(result.elapsedMs).toBeGreaterThanOrEqual(bound - 50);
    // One checking tick late at most, plus scheduling slack on a loaded machine.
    expect(result.elapsedMs).toBeLessThan(bound + TICK_MS + 1000);
  });

  it.each([
    ['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', /CONNECT/],
    [
      'a websocket upgrade',
      'GET /v1/proxies HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      /protocol upgrade/,
    ],
  ])('%s gets the JSON 405 every other wrong method gets', async (_case, request, message) => {
    const result = await exchange(h.server.port, [request]);
    expect(result.status).toBe(405);
    expect(result.headers.allow).toBe('GET, HEAD, POST, DELETE');
    expect(result.body).toEqual({ error: 'method_not_allowed', message: expect.stringMatching(message) });
    expect(
      validate(result.body, sharedSchema('MethodNotAllowed'), openApiDocument.components.schemas),
    ).toEqual([]);
  });

  it.each([
    ['headers over 16 KiB', `GET /v1/proxies HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`],
    ['a URL over 16 KiB', `GET /v1/proxies?attr.x=${'a'.repeat(17 * 1024)} HTTP/1.1\r\nHost: x\r\n\r\n`],
  ])('431 with the JSON error for %s', async (_case, request) => {
    const result = await exchange(h.server.port, [request]);
    expect(result.status).toBe(431);
    expect(result.body).toEqual({
      error: 'headers_too_large',
      message: 'request line and headers exceed 16384 bytes',
    });
    expect(
      validate(result.body, sharedSchema('HeadersTooLarge'), openApiDocument.components.schemas),
    ).toEqual([]);
  });

  it('a URL just under the limit is answered normally', async () => {
    const result = await exchange(h.server.port, [
      `GET /v1/proxies?attr.x=${'a'.repeat(15 * 1024)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    ]);
    expect(result.status).toBe(200);
  });

  it('400 with the JSON error for bytes that are not HTTP', async () => {
    const result = await exchange(h.server.port, ['HELLO THERE\r\n\r\n']);
    expect(result.status).toBe(400);
    expect(result.body).toEqual({
      error: 'invalid_request',
      message: expect.stringMatching(/^malformed HTTP request/),
    });
  });

  it('keeps serving everyone else throughout', async () => {
    expect((await h.call('GET', '/v1/proxies')).status).toBe(200);
  });
});

describe('which parser errors get which answer', () => {
  const limits = { headersTimeoutMs: 10_000, requestTimeoutMs: 15_000, maxHeaderSize: 16_384 };
  it.each<[string, number | undefined, string | undefined]>([
    ['ERR_HTTP_REQUEST_TIMEOUT', 408, 'request_timeout'],
    ['HPE_HEADER_OVERFLOW', 431, 'headers_too_large'],
    ['HPE_INVALID_METHOD', 400, 'invalid_request'],
    ['HPE_INVALID_CONTENT_LENGTH', 400, 'invalid_request'],
    ['ECONNRESET', undefined, undefined],
    ['EPIPE', undefined, undefined],
    ['ESOMETHINGELSE', undefined, undefined],
  ])('%s → %s %s', (code, status, error) => {
    const reply = clientErrorReply({ code, message: 'x' }, limits);
    expect(reply?.status).toBe(status);
    expect(reply?.code).toBe(error);
  });
});
