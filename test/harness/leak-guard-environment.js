// The jest environment of every test file: jest's node environment, plus a check when the file
// ends that it left no TCP server listening in the jest process. Suites run in band in that one
// process, so a forgotten server (or a library's, started at import) outlives its file; a ref'd
// one keeps jest from exiting at all. Two views, since neither sees everything:
// - the ref'd net.Server handles the file created (Node's own list of active handles);
// - on Linux, the process's listening sockets (/proc/self/fd against /proc/net/tcp{,6}), which
//   also shows an unref'd server, e.g. the open proxy `crawlee`'s browser pool starts on [::]
//   at import (issue 47 item 7).
import { TestEnvironment } from 'jest-environment-node';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';

const LINUX = existsSync('/proc/self/fd') && existsSync('/proc/net/tcp');
// close() completes on a later tick; an afterAll that did not wait for it gets this long.
const GRACE_MS = 2000;

/** Inode -> "address:port" of every TCP socket this process has listening (Linux), else empty. */
function listeningSockets() {
  const out = new Map();
  if (!LINUX) return out;
  const mine = new Set();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m) mine.add(m[1]);
    } catch {
      // the fd closed meanwhile (readdir's own, or a socket)
    }
  }
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(file)) continue;
    for (const row of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const c = row.trim().split(/\s+/);
      // c[1] local address (hex ip:port), c[3] state (0A = LISTEN), c[9] inode
      if (c[3] !== '0A' || !mine.has(c[9])) continue;
      const [ip, port] = c[1].split(':');
      const any = /^0+$/.test(ip);
      out.set(
        c[9],
        `${any ? (ip.length > 8 ? '[::]' : '0.0.0.0') : ip.length > 8 ? 'ipv6' : hexIPv4(ip)}:${parseInt(port, 16)}`,
      );
    }
  }
  return out;
}

function hexIPv4(hex) {
  return [6, 4, 2, 0].map((i) => parseInt(hex.slice(i, i + 2), 16)).join('.');
}

function listeningServers() {
  return process._getActiveHandles().filter((h) => h instanceof net.Server && h.listening);
}

function describeServer(server) {
  const a = server.address();
  return a !== null && typeof a === 'object' ? `${a.address}:${a.port}` : String(a);
}

export default class LeakGuardEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
  }

  async setup() {
    await super.setup();
    this.serversBefore = new Set(listeningServers());
    this.socketsBefore = new Set(listeningSockets().keys());
  }

  async teardown() {
    const left = () => {
      const servers = listeningServers().filter((s) => !this.serversBefore.has(s));
      const ports = new Set(servers.map((s) => `:${s.address()?.port}`));
      return [
        ...servers.map((s) => `a server listening on ${describeServer(s)}`),
        // A ref'd server shows in both views: its socket is not listed twice.
        ...[...listeningSockets()]
          .filter(([inode, at]) => !this.socketsBefore.has(inode) && ![...ports].some((p) => at.endsWith(p)))
          .map(([, at]) => `a socket listening on ${at} (unref'd, or not a net.Server)`),
      ];
    };
    let found = left();
    for (let waited = 0; found.length > 0 && waited < GRACE_MS; waited += 100) {
      await sleep(100);
      found = left();
    }
    await super.teardown();
    if (found.length > 0) {
      throw new Error(
        `${this.testPath} left TCP listeners open in the jest process after its last test ` +
          `(close them in afterAll/afterEach; see test/harness/leak-guard-environment.js):\n  ` +
          found.join('\n  '),
      );
    }
  }
}
