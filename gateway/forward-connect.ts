// CONNECT tunnels: one leased upstream per tunnel, the upstream's CONNECT made with its
// credentials, then bytes piped both ways (no TLS interception). A failure before the tunnel
// is up (refused, reset, timeout, the upstream's own non-2xx other than 502) is reported
// unreachable and retried through another upstream; the client sees only the tunnel.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import {
  leaseRequest,
  attemptFailed,
  endpointRefused,
  leaseForAttempt,
  upstreamFailed,
  type GatewayContext,
} from './gateway-context.js';
import type { HeldLease } from './lease-pool.js';
import { replyErrorOnSocket } from './replies.js';
import { canonicalTarget, connectAuthority } from './target.js';
import { REFUSAL_SHOWN_TO_CLIENTS } from './upstream-guard.js';
import { connectVerdict } from './upstream-outcome.js';
import { openTunnel } from './upstream-tunnel.js';
import type { UsernameOptions } from './username.js';

const ESTABLISHED = 'HTTP/1.1 200 Connection established\r\n\r\n';

export async function forwardConnect(
  ctx: GatewayContext,
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
  owner: string,
  options: UsernameOptions,
  startedAt: number,
): Promise<void> {
  const authority = connectAuthority(req.url ?? '');
  const target = authority === undefined ? undefined : canonicalTarget(authority.host);
  if (authority === undefined || target === undefined) {
    ctx.metrics.ended('tunnel', 'refused');
    return replyErrorOnSocket(client, {
      status: 400,
      code: 'invalid_request',
      message: `CONNECT needs host:port, got "${(req.url ?? '').slice(0, 100)}"`,
    });
  }
  let gone = false;
  const onGone = () => {
    gone = true;
  };
  client.once('close', onGone);
  client.on('error', onGone);
  const leaseReq = leaseRequest(owner, options, target, ctx.options.ttlSeconds);
  let last = 'none tried';
  for (let attempt = 1; attempt <= ctx.options.maxAttempts; attempt++) {
    const taken = await leaseForAttempt(ctx, leaseReq, 'tunnel', () => gone);
    if ('refusal' in taken) return replyErrorOnSocket(client, taken.refusal);
    const lease: HeldLease = taken.lease;
    if (attempt > 1) ctx.metrics.retried('tunnel');
    ctx.metrics.addedLatency('tunnel', (performance.now() - startedAt) / 1000);
    const opened = await openTunnel(lease.upstream, req.url!, ctx.options.connectTimeoutMs, ctx.guard);
    if (gone) {
      if (opened.kind === 'open') opened.socket.destroy();
      ctx.pool.give(lease, leaseReq.session);
      return ctx.metrics.ended('tunnel', 'client_gone');
    }
    if (opened.kind === 'open') {
      client.off('close', onGone);
      return splice(ctx, lease, leaseReq.session, client, opened.socket, head, opened.early);
    }
    if (opened.kind === 'status') {
      const verdict = connectVerdict(opened.status);
      if (verdict.kind === 'site_down') {
        ctx.pool.give(lease, leaseReq.session);
        ctx.metrics.ended('tunnel', 'site_down');
        return replyErrorOnSocket(client, {
          status: 502,
          code: 'site_unreachable',
          message: `the upstream proxy could not reach ${authority.host}:${authority.port} (it answered 502): the site's failure, not the proxy's`,
        });
      }
      last = `${lease.upstream.id} answered the CONNECT with ${opened.status}`;
    } else {
      const shown = opened.reason === 'endpoint_refused' ? REFUSAL_SHOWN_TO_CLIENTS : opened.message;
      last = `${lease.upstream.id}: ${opened.reason} (${shown})`;
      if (opened.reason === 'endpoint_refused') endpointRefused(ctx, lease.upstream.id, opened.message);
    }
    try {
      await ctx.book.report(lease.leaseID, 'unreachable', { target }, owner);
    } catch (err) {
      ctx.logger.warn({ err, proxy: lease.upstream.id }, 'gateway: unreachable report failed');
    }
    await attemptFailed(ctx, lease.upstream.id, leaseReq);
    await ctx.pool.drop(lease).catch(() => undefined);
  }
  ctx.metrics.ended('tunnel', 'upstream_failed');
  replyErrorOnSocket(client, upstreamFailed(ctx.options.maxAttempts, last));
}

/**
 * Joins the client to the upstream's tunnel; the lease is held until either side closes, or
 * the tunnel carries no byte either way for the tunnel idle timeout. Without that bound, a
 * client gone without a FIN (its host down, a partition) held both sockets and the lease for
 * ever when the tunnel was idle, since nothing is ever written to learn it is gone; TCP
 * keep-alive (on since the sockets opened) finds it sooner only where the kernel's probes
 * are short.
 */
function splice(
  ctx: GatewayContext,
  lease: HeldLease,
  session: string | undefined,
  client: Duplex,
  upstream: Socket,
  head: Buffer,
  early: Buffer,
): void {
  ctx.metrics.tunnelOpened();
  let closed = false;
  const close = (how: 'ok' | 'idle') => {
    if (closed) return;
    closed = true;
    client.destroy();
    upstream.destroy();
    ctx.metrics.tunnelClosed();
    // The upstream socket's own counters (no listener per chunk): what went each way,
    // the CONNECT exchange with the upstream included.
    ctx.metrics.carried(upstream.bytesWritten, upstream.bytesRead);
    ctx.metrics.ended('tunnel', how);
    ctx.pool.give(lease, session);
  };
  const ended = () => close('ok');
  client.once('close', ended);
  upstream.once('close', ended);
  client.on('error', ended);
  upstream.on('error', ended);
  // Each socket's own inactivity timer (reset by libuv on every read and completed write, no
  // listener per chunk): a download or an upload keeps both sides busy; a client that stopped
  // reading stalls the writes towards it and, through pipe()'s back-pressure, the reads from
  // the upstream, so a stuck tunnel goes quiet on both and either timer ends it.
  const idle = () => {
    ctx.logger.debug({ proxy: lease.upstream.id }, 'gateway: tunnel idle, closed');
    close('idle');
  };
  for (const socket of [client as Socket, upstream]) {
    socket.setTimeout?.(ctx.options.tunnelIdleMs);
    socket.once('timeout', idle);
  }
  client.write(ESTABLISHED);
  if (early.length > 0) client.write(early);
  if (head.length > 0) upstream.write(head);
  client.pipe(upstream);
  upstream.pipe(client);
  upstream.resume();
}
