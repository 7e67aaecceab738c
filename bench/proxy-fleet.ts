// The benchmarks' proxy fleet: `count` loopback forward proxies (CONNECT only, what an https
// probe uses) and one HTTPS target, in a CHILD process so the fleet's CPU and heap are never
// the measured process's. bench/health.ts and bench/memory.ts both start it.
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import type { SelfSignedCert } from '../framework/testing/self-signed-cert.js';

export interface FleetOptions {
  cert: SelfSignedCert;
  /** How many proxy listeners. */
  count: number;
  /** The share of proxies that lose egress (502 to CONNECT) and regain it every flapSeconds; 0: none. */
  flakyFraction?: number;
  flapSeconds?: number;
}

export interface FleetReady {
  /** One loopback port per proxy. */
  ports: number[];
  /** The HTTPS target every proxy reaches: what the probes fetch. */
  probeURL: string;
}

export interface RunningFleet extends FleetReady {
  /** Flips the flaky proxies' egress now (the timer does it every flapSeconds). */
  flap(): void;
  close(): Promise<void>;
}

/** Starts the fleet in this process (the child's half; tests use it directly). */
export async function runFleet(options: FleetOptions): Promise<RunningFleet> {
  const { cert, count, flakyFraction = 0, flapSeconds = 60 } = options;
  const target = https.createServer({ key: cert.key, cert: cert.cert }, (_req, res) =>
    res.writeHead(204).end(),
  );
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  const egress: boolean[] = new Array<boolean>(count).fill(true);
  const servers: http.Server[] = [];
  const ports: number[] = [];
  for (let i = 0; i < count; i++) {
    const server = http.createServer((_req, res) => res.writeHead(405).end());
    server.on('connect', (req: http.IncomingMessage, socket: net.Socket) => {
      socket.on('error', () => undefined);
      socket.on('end', () => socket.destroy());
      if (!egress[i]) return void socket.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n');
      const [host, port] = (req.url ?? '').split(':');
      const upstream = net.connect(Number(port), host, () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.pipe(socket);
        socket.pipe(upstream);
      });
      upstream.on('error', () => socket.destroy());
      socket.on('close', () => upstream.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    ports.push((server.address() as net.AddressInfo).port);
  }
  const flaky = Math.round(count * flakyFraction);
  const flap = () => {
    for (let i = 0; i < flaky; i++) egress[i] = !egress[i];
  };
  const timer = flaky > 0 ? setInterval(flap, flapSeconds * 1000) : undefined;
  const close = async () => {
    clearInterval(timer);
    await Promise.all(
      [...servers, target].map(
        (s) => new Promise<void>((resolve) => s.close(() => resolve()).closeAllConnections()),
      ),
    );
  };
  return {
    ports,
    probeURL: `https://127.0.0.1:${(target.address() as net.AddressInfo).port}/generate_204`,
    flap,
    close,
  };
}

/** Forks a process running the fleet; it exits when the parent disconnects. */
export function startFleet(options: FleetOptions): Promise<{ child: ChildProcess; fleet: FleetReady }> {
  const child = fork(fileURLToPath(import.meta.url), ['--fleet'], { execArgv: process.execArgv });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`fleet process exited early with ${code}`)));
    child.once('message', (fleet) => {
      child.removeAllListeners('exit');
      resolve({ child, fleet: fleet as FleetReady });
    });
    child.send(options);
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv.includes('--fleet')) {
  process.once('message', (options) => {
    void runFleet(options as FleetOptions).then(({ ports, probeURL }) =>
      process.send?.({ ports, probeURL } satisfies FleetReady),
    );
  });
  process.on('disconnect', () => process.exit(0));
}
