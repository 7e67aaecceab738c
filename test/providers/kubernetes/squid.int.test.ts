import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent, request } from 'undici';
import { freePort } from '../../../framework/testing/control-plane.js';
import { ProbeReason } from '../../../health/probe-reason.js';
import type { ProbeTarget } from '../../../health/probe-target.js';
import { SocketProber } from '../../../health/socket-prober.js';
import type { CreateRequest } from '../../../providers/contract.js';
import type { KubernetesSettings } from '../../../providers/kubernetes/config.js';
import {
  SQUID_CONFIG_ENV,
  SQUID_PASSWD_ENV,
  SQUID_PASSWD_FILE,
  buildPod,
} from '../../../providers/kubernetes/pod-spec.js';
import {
  SQUID_GRACE_SECONDS,
  SQUID_SHUTDOWN_SECONDS,
  squidConfig,
  type SquidConfigInput,
} from '../../../providers/kubernetes/squid-config.js';

// The configuration the kubernetes provider ships, run by a real Squid (Debian's `squid`
// package; .ci/run installs it) on loopback, against a real HTTP server.

function squidBinary(): string {
  const which = spawnSync('/bin/sh', ['-c', 'command -v squid || ls /usr/sbin/squid'], { encoding: 'utf8' });
  const found = (which.stdout ?? '').trim().split('\n')[0];
  if (which.status !== 0 || !found)
    throw new Error('squid is not installed: apt-get install squid (.ci/run does this)');
  return found;
}

interface RunningSquid {
  port: number;
  child: ChildProcess;
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** Runs squid in the foreground with the generated config, bound to loopback only. */
async function startSquid(input: Omit<SquidConfigInput, 'port'>): Promise<RunningSquid> {
  const port = await freePort();
  return runSquid(squidConfig({ ...input, port }), port, undefined);
}

/**
 * Runs the squid.conf and passwd line a Pod of the provider gets (buildPod's environment), with
 * only the listener moved to loopback and the passwd file to a temporary folder.
 */
async function startSquidPod(
  credentials: CreateRequest['credentials'],
  settings: Omit<KubernetesSettings, 'namespace' | 'image'>,
): Promise<RunningSquid> {
  const port = await freePort();
  const pod = buildPod(
    {
      uid: 'uid-1',
      proxy: 'default/px',
      namespace: 'default',
      owner: 'test',
      port,
      placement: {},
      ...(credentials ? { credentials } : {}),
    },
    { namespace: 'proxies', image: 'squid', ...settings },
  );
  const env = (name: string) => pod.spec!.containers[0].env!.find((e) => e.name === name)!.value ?? '';
  return runSquid(env(SQUID_CONFIG_ENV), port, env(SQUID_PASSWD_ENV));
}

async function runSquid(generated: string, port: number, passwd: string | undefined): Promise<RunningSquid> {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-operator-squid-'));
  // Squid started as root runs its helpers as its own user, who must read the passwd file.
  chmodSync(dir, 0o755);
  if (passwd !== undefined) writeFileSync(join(dir, 'passwd'), `${passwd}\n`, { mode: 0o644 });
  // Loopback only, by construction: the listener, and any lookup Squid might make.
  const conf =
    generated
      .replace(`http_port ${port}`, `http_port 127.0.0.1:${port}`)
      .replace(SQUID_PASSWD_FILE, join(dir, 'passwd')) +
    'visible_hostname localhost\ndns_nameservers 127.0.0.1\n';
  writeFileSync(join(dir, 'squid.conf'), conf);
  const child = spawn(squidBinary(), ['-N', '-d', '1', '-f', join(dir, 'squid.conf')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const up = await request(`http://127.0.0.1:${port}/`).then(
      async (r) => (await r.body.dump(), true),
      () => false,
    );
    if (up) break;
    if (child.exitCode !== null) throw new Error(`squid exited with ${child.exitCode}: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`squid did not listen on ${port}: ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port,
    child,
    exited,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The status code of Squid's answer to a CONNECT to `target`, sent on a raw socket. */
async function connectStatus(
  port: number,
  target: string,
  credentials: { username: string; password: string },
): Promise<number> {
  const basic = Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64');
  const socket = connect(port, '127.0.0.1');
  try {
    socket.write(
      `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Basic ${basic}\r\n\r\n`,
    );
    const first = await new Promise<string>((resolve, reject) => {
      let got = '';
      socket.on('data', (b: Buffer) => {
        got += b.toString('latin1');
        if (got.includes('\r\n')) resolve(got.slice(0, got.indexOf('\r\n')));
      });
      socket.once('error', reject);
      socket.once('end', () => reject(new Error(`Squid closed without a status line: ${got}`)));
    });
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(first);
    if (!status) throw new Error(`not a status line: ${first}`);
    return Number(status[1]);
  } finally {
    socket.destroy();
  }
}

describe("the kubernetes provider's squid.conf, run by a real Squid", () => {
  let origin: Server;
  let originPort: number;
  /** Requests the origin is holding open (a slow download) until the test lets go. */
  const held: Array<() => void> = [];

  beforeAll(async () => {
    origin = createServer((req, res) => {
      if (req.url === '/slow') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('first byte');
        held.push(() => res.end());
        return;
      }
      res.end('hello from the origin');
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    originPort = (origin.address() as { port: number }).port;
  });
  afterAll(async () => {
    held.forEach((release) => release());
    origin.closeAllConnections();
    await new Promise((r) => origin.close(r));
  });

  const fetchThrough = async (proxyPort: number, path = '/', userinfo = '', host = '127.0.0.1') => {
    const dispatcher = new ProxyAgent(`http://${userinfo}127.0.0.1:${proxyPort}`);
    try {
      const res = await request(`http://${host}:${originPort}${path}`, { dispatcher });
      return { status: res.statusCode, body: await res.body.text() };
    } finally {
      await dispatcher.close();
    }
  };

  it.each([
    ['a client in the allowed ranges is proxied', ['127.0.0.0/8'], 200],
    ['a client outside them is refused', ['10.0.0.0/8', '192.168.0.0/16'], 403],
  ])('%s', async (_case, clients, status) => {
    const squid = await startSquid({ clients });
    try {
      const res = await fetchThrough(squid.port);
      expect(res.status).toBe(status);
      if (status === 200) expect(res.body).toBe('hello from the origin');
    } finally {
      await squid.stop();
    }
  });

  it('refuses a denied destination even to an allowed client', async () => {
    const squid = await startSquid({
      clients: ['127.0.0.0/8'],
      denyDestinations: { addresses: ['127.0.0.1/32'] },
    });
    try {
      expect((await fetchThrough(squid.port)).status).toBe(403);
    } finally {
      await squid.stop();
    }
  });

  describe('as a Pod of the provider runs it, with credentials and the default refused destinations', () => {
    const credentials = { username: 'crawler', password: 'a-random-password:with/odd chars' };
    const userinfo = `${encodeURIComponent(credentials.username)}:${encodeURIComponent(credentials.password)}@`;
    // On loopback the probe target (127.0.0.1) is inside a refused range (127.0.0.0/8): it is
    // allowed by explicit configuration, as tests must; 127.0.0.2 stands in for an address
    // inside the cluster (an API server, a Pod) and stays refused.
    const settings = { clients: ['127.0.0.0/8'], allowedDestinations: ['127.0.0.1/32'] };
    let squid: RunningSquid;
    let inside: Server;
    let insideHits = 0;

    beforeAll(async () => {
      squid = await startSquidPod(credentials, settings);
      inside = createServer((_req, res) => {
        insideHits++;
        res.end('inside');
      });
      await new Promise<void>((resolve) => inside.listen(originPort, '127.0.0.2', resolve));
    });
    afterAll(async () => {
      await squid.stop();
      inside.closeAllConnections();
      await new Promise((r) => inside.close(r));
    });

    it('answers 407 without credentials and with wrong ones', async () => {
      // undici turns a proxy's 407 into an error of its own.
      await expect(fetchThrough(squid.port)).rejects.toThrow(/407/);
      await expect(fetchThrough(squid.port, '/', 'crawler:wrong@')).rejects.toThrow(/407/);
    });

    it('proxies a client with the credentials to the explicitly allowed probe target', async () => {
      const res = await fetchThrough(squid.port, '/', userinfo);
      expect(res).toEqual({ status: 200, body: 'hello from the origin' });
    });

    it.each<[string, Partial<ProbeTarget>, string]>([
      ['with the credentials passes', { credentials }, ProbeReason.ProbeSucceeded],
      ['without credentials is told so', {}, ProbeReason.ProxyAuthenticationRequired],
      [
        'with wrong credentials is told so',
        { credentials: { ...credentials, password: 'wrong' } },
        ProbeReason.ProxyAuthenticationRequired,
      ],
    ])("the health engine's probe through it %s", async (_what, over, reason) => {
      const prober = new SocketProber();
      try {
        const outcome = await prober.probe(
          {
            key: 'default/px',
            host: '127.0.0.1',
            port: squid.port,
            probeURL: `http://127.0.0.1:${originPort}/`,
            intervalSeconds: 10,
            timeoutSeconds: 5,
            failureThreshold: 1,
            successThreshold: 1,
            expectedStatusCodes: [200],
            ...over,
          },
          new AbortController().signal,
        );
        expect(outcome.reason).toBe(reason);
        expect(outcome.message).not.toContain(credentials.password);
      } finally {
        await prober.close();
      }
    });

    it('refuses a leased client a request to an address inside, and never connects to it', async () => {
      expect((await fetchThrough(squid.port, '/', userinfo, '127.0.0.2')).status).toBe(403);
      expect(insideHits).toBe(0);
    });

    // Port 443 passes `http_access deny CONNECT !SSL_ports`, so only the destination rule
    // can refuse the first; the second (the allowed probe target, same port) is the control:
    // Squid tries it (nothing listens there: 503, or 200 if something does), never a 403.
    it.each<[string, string, (status: number) => void]>([
      [
        'refuses a CONNECT tunnel to an inside address on port 443 (the destination rule)',
        '127.0.0.2',
        (s) => expect(s).toBe(403),
      ],
      [
        'tries a CONNECT tunnel to the allowed address on port 443 (the control)',
        '127.0.0.1',
        (s) => expect(s).not.toBe(403),
      ],
    ])('%s', async (_what, host, check) => {
      check(await connectStatus(squid.port, `${host}:443`, credentials));
    });
  });

  it("exits on SIGTERM within its shutdown lifetime, inside the Pod's grace, even with a download open", async () => {
    const squid = await startSquid({ clients: ['127.0.0.0/8'] });
    try {
      const dispatcher = new ProxyAgent(`http://127.0.0.1:${squid.port}`);
      const res = await request(`http://127.0.0.1:${originPort}/slow`, { dispatcher });
      expect(res.statusCode).toBe(200);
      const started = Date.now();
      squid.child.kill('SIGTERM');
      await squid.exited;
      const seconds = (Date.now() - started) / 1000;
      res.body.destroy();
      await dispatcher.destroy();
      expect(seconds).toBeLessThan(SQUID_SHUTDOWN_SECONDS + 2);
      expect(seconds).toBeLessThan(SQUID_GRACE_SECONDS);
    } finally {
      await squid.stop();
    }
  });
});
