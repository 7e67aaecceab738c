// A minimal forward proxy for tests only (providers/mock has the production one): plain
// HTTP absolute-URI requests and CONNECT tunnels, with failure modes switchable at runtime.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export type ProxyMode =
  /** Forwards requests and tunnels. */
  | 'healthy'
  /** Accepts TCP but cannot reach anything: 502 to CONNECT and to plain requests. */
  | 'cannot-egress'
  /** Accepts TCP, reads the request, then closes the connection without a word. */
  | 'closes'
  /** Accepts TCP and never answers. */
  | 'black-hole';

export class TestForwardProxy {
  mode: ProxyMode;
  /** When set, requests and CONNECTs without exactly this Proxy-Authorization get a 407. */
  requiredAuthorization: string | undefined;
  connectCount = 0;
  requestCount = 0;
  /** TCP connections accepted, whatever came over them. */
  connections = 0;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: http.Server,
    mode: ProxyMode,
  ) {
    this.mode = mode;
  }

  static async start(mode: ProxyMode = 'healthy', host = '127.0.0.1'): Promise<TestForwardProxy> {
    const server = http.createServer();
    const proxy = new TestForwardProxy(server, mode);
    server.on('connection', (socket: net.Socket) => {
      proxy.connections++;
      proxy.track(socket);
    });
    server.on('request', (req, res) => proxy.forward(req, res));
    server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) =>
      proxy.tunnel(req, socket, head),
    );
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    return proxy;
  }

  /** Client and upstream sockets currently open; 0 once every probe connection is gone. */
  get openSockets(): number {
    return this.sockets.size;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
  }

  private forward(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.requestCount++;
    if (this.mode === 'black-hole') return;
    if (this.mode === 'closes') return void req.socket.destroy();
    if (this.requiredAuthorization && req.headers['proxy-authorization'] !== this.requiredAuthorization)
      return void res.writeHead(407, { 'proxy-authenticate': 'Basic realm="test"' }).end();
    if (this.mode === 'cannot-egress') return void res.writeHead(502).end('cannot reach target');
    const upstream = http.request(req.url ?? '', { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  }

  private tunnel(req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    this.connectCount++;
    this.track(socket);
    // http.Server sockets are half-open capable: without this a client's FIN would leave it open.
    socket.on('end', () => socket.destroy());
    if (this.mode === 'black-hole') return;
    if (this.mode === 'closes') return void socket.destroy();
    if (this.requiredAuthorization && req.headers['proxy-authorization'] !== this.requiredAuthorization)
      return void socket.end(
        'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n',
      );
    if (this.mode === 'cannot-egress')
      return void socket.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n');
    const [host, port] = splitHostPort(req.url ?? '');
    const upstream = net.connect(port, host, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    this.track(upstream);
    upstream.on('error', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
  }
}

function splitHostPort(authority: string): [string, number] {
  const i = authority.lastIndexOf(':');
  return [authority.slice(0, i).replace(/^\[|\]$/g, ''), Number(authority.slice(i + 1))];
}
