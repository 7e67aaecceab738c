// Opens a CONNECT tunnel through one upstream forward proxy, with the upstream's credentials
// added here (clients never see them). Resolves with the upstream's status and, on 2xx, the
// open socket and any bytes that came after its answer.
import { connect, type NetConnectOpts, type Socket } from 'node:net';
import type { Upstream, UpstreamGuard } from './ports.js';
import { isUpstreamRefusal, upstreamConnect } from './upstream-guard.js';

export type TunnelAttempt =
  | { kind: 'open'; socket: Socket; early: Buffer }
  | { kind: 'status'; status: number }
  | {
      kind: 'failed';
      /** endpoint_refused: the UpstreamGuard refused its address; nothing was sent to it. */
      reason: 'refused' | 'reset' | 'timeout' | 'malformed' | 'error' | 'endpoint_refused';
      message: string;
    };

/** An answer head longer than this is not a forward proxy's answer to a CONNECT. */
const MAX_HEAD_BYTES = 16 * 1024;
const HEAD_END = Buffer.from('\r\n\r\n');

/**
 * Bytes a tunnel's socket may queue before pipe() pauses the other side. At the default (64
 * KiB) every 64 KiB read from libuv reaches the mark, so a bulk transfer was paused and resumed
 * (readStop, readStart, a drain tick) on every chunk; a threshold, not a buffer: an idle tunnel
 * holds nothing.
 */
export const TUNNEL_HIGH_WATER_MARK = 256 * 1024;

/**
 * TCP keep-alive's first probe after this much silence, on both sockets of a tunnel (and every
 * client connection): a peer gone without a FIN is found by the kernel's probes, and idle NAT
 * and conntrack entries on the way stay open (most drop a flow after 5 minutes or more).
 */
export const TCP_KEEPALIVE_DELAY_MS = 30_000;

export function basicAuthorization(credentials: { username: string; password: string }): string {
  return `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`, 'utf8').toString('base64')}`;
}

export function openTunnel(
  upstream: Upstream,
  authority: string,
  timeoutMs: number,
  guard?: UpstreamGuard,
): Promise<TunnelAttempt> {
  const how = upstreamConnect(upstream, guard);
  if (how.kind === 'refused')
    return Promise.resolve({ kind: 'failed', reason: 'endpoint_refused', message: how.message });
  const { lookup } = how;
  return new Promise((resolve) => {
    const options: NetConnectOpts & { highWaterMark: number } = {
      host: upstream.host,
      port: upstream.port,
      noDelay: true,
      keepAlive: true,
      keepAliveInitialDelay: TCP_KEEPALIVE_DELAY_MS,
      highWaterMark: TUNNEL_HIGH_WATER_MARK,
      ...(lookup && { lookup }),
    };
    const socket = connect(options);
    let head: Buffer = Buffer.alloc(0);
    let settled = false;
    const finish = (attempt: TunnelAttempt) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off('data', onData);
      // Once open, the tunnel's owner listens: these would keep this attempt's closure (and
      // the answer's read buffer) alive as long as the tunnel.
      socket.off('error', onError);
      socket.off('close', onClose);
      if (attempt.kind !== 'open') socket.destroy();
      else socket.pause();
      resolve(attempt);
    };
    const timer = setTimeout(
      () =>
        finish({ kind: 'failed', reason: 'timeout', message: `no answer to CONNECT within ${timeoutMs} ms` }),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const end = head.indexOf(HEAD_END);
      if (end < 0) {
        if (head.length > MAX_HEAD_BYTES)
          finish({ kind: 'failed', reason: 'malformed', message: 'answer head too long' });
        return;
      }
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, Math.min(end, 64)).toString('latin1'));
      if (m === null) return finish({ kind: 'failed', reason: 'malformed', message: 'not an HTTP answer' });
      const status = Number(m[1]);
      if (status >= 200 && status < 300)
        finish({ kind: 'open', socket, early: head.subarray(end + HEAD_END.length) });
      else finish({ kind: 'status', status });
    };
    socket.on('data', onData);
    socket.once('connect', () => {
      const auth =
        upstream.credentials === undefined
          ? ''
          : `Proxy-Authorization: ${basicAuthorization(upstream.credentials)}\r\n`;
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`);
    });
    const onError = (err: NodeJS.ErrnoException) =>
      finish(
        isUpstreamRefusal(err)
          ? { kind: 'failed', reason: 'endpoint_refused', message: err.message }
          : {
              kind: 'failed',
              reason: err.code === 'ECONNREFUSED' ? 'refused' : err.code === 'ECONNRESET' ? 'reset' : 'error',
              message: err.code ?? err.message,
            },
      );
    const onClose = () =>
      finish({ kind: 'failed', reason: 'reset', message: 'closed before answering the CONNECT' });
    socket.once('error', onError);
    socket.once('close', onClose);
  });
}
