// Plain HTTP (absolute-URI requests): each request goes through a leased upstream with the
// upstream's credentials added here. An upstream that refuses, resets or times out before
// answering is reported unreachable and the request retried through another; a ban or rate
// limit the site answers is passed to the client and reported for the target.
import {
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import {
  leaseRequest,
  attemptFailed,
  endpointRefused,
  leaseForAttempt,
  upstreamFailed,
  type GatewayContext,
} from './gateway-context.js';
import type { HeldLease } from './lease-pool.js';
import type { GatewayLeaseRequest } from './ports.js';
import { replyError, type GatewayError } from './replies.js';
import { canonicalTarget } from './target.js';
import { basicAuthorization } from './upstream-tunnel.js';
import { isUpstreamRefusal, REFUSAL_SHOWN_TO_CLIENTS, upstreamConnect } from './upstream-guard.js';
import { isIdempotent, mayResend, responseVerdict, type FailurePoint } from './upstream-outcome.js';
import type { UsernameOptions } from './username.js';

/** Headers of one hop only (RFC 9110 7.6.1), plus the client's own credentials for us. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

type Sent =
  | { kind: 'response'; response: IncomingMessage }
  | { kind: 'failed'; message: string; stale: boolean; point: FailurePoint; endpointRefused?: true };

export async function forwardHttp(
  ctx: GatewayContext,
  req: IncomingMessage,
  res: ServerResponse,
  owner: string,
  options: UsernameOptions,
  startedAt: number,
): Promise<void> {
  let url: URL;
  try {
    url = new URL(req.url!);
  } catch {
    return reject(ctx, res, 'invalid_request', `"${req.url!.slice(0, 100)}" is not an absolute URL`);
  }
  if (url.protocol !== 'http:')
    return reject(
      ctx,
      res,
      'invalid_request',
      `${url.protocol} URLs go through a CONNECT tunnel, not an absolute-URI request`,
    );
  const target = canonicalTarget(url.hostname);
  if (target === undefined) return reject(ctx, res, 'invalid_request', 'the request names no host');
  const body = await readBody(req, ctx.options.maxBodyBytes);
  if (body === 'too_large') {
    ctx.metrics.ended('http', 'refused');
    return replyError(res, {
      status: 413,
      code: 'payload_too_large',
      message: `request bodies are held for retries up to ${ctx.options.maxBodyBytes} bytes`,
    });
  }
  if (body === 'gone') return ctx.metrics.ended('http', 'client_gone');
  const headers = forwardedHeaders(req);
  const leaseReq = leaseRequest(owner, options, target, ctx.options.ttlSeconds);
  const clientGone = () => req.socket.destroyed;
  // The wait bound counts from the request's arrival: a turn at the site's pace past it is not taken.
  const deadline = Date.now() - (performance.now() - startedAt) + ctx.options.maxRestWaitMs;
  const room = (upstreamID: string) => ctx.paces.hasRoom(upstreamID, target);
  let last = 'none tried';
  let staleRetried = false;
  for (let attempt = 1; attempt <= ctx.options.maxAttempts; attempt++) {
    const taken = await leaseForAttempt(ctx, leaseReq, 'http', clientGone, room);
    if ('refusal' in taken) return replyError(res, taken.refusal);
    const lease: HeldLease = taken.lease;
    const turn = await ctx.paces.turn(lease.upstream.id, target, deadline, clientGone);
    if (turn.heldMs > 0) ctx.metrics.paced(turn.heldMs / 1000);
    if (turn.kind !== 'go') {
      ctx.pool.give(lease, leaseReq.session);
      if (turn.kind === 'client_gone') return ctx.metrics.ended('http', 'client_gone');
      ctx.metrics.ended('http', 'paced');
      return replyError(res, sitePaced(target, turn.waitMs));
    }
    if (attempt > 1) ctx.metrics.retried('http');
    const sentAt = performance.now();
    const sentAtMs = Date.now();
    ctx.metrics.addedLatency('http', (sentAt - startedAt) / 1000);
    const sent = await sendOnce(ctx, lease, req.method!, url, headers, body);
    if (sent.kind === 'response') {
      const verdict = responseVerdict(
        sent.response.statusCode!,
        header(sent.response, 'retry-after'),
        ctx.options.codes,
        Date.now(),
      );
      if (verdict.kind === 'report' && verdict.report === 'rate_limited') {
        rateLimited(ctx, lease, target, sentAtMs, verdict.retryAfterSeconds);
        // The lease stays: its pace holds this upstream's next requests to the site back.
        return relay(ctx, lease, leaseReq, sent.response, res, false, body.length);
      }
      if (verdict.kind !== 'retry') {
        if (verdict.kind === 'report') {
          void report(ctx, lease, verdict.report, target, verdict.retryAfterSeconds);
          // Every session on that proxy for this target moves, those sharing its lease too.
          ctx.pool.retireProxy(lease.upstream.id, target);
        } else ctx.paces.succeeded(lease.upstream.id, target, sentAtMs);
        return relay(ctx, lease, leaseReq, sent.response, res, verdict.kind === 'report', body.length);
      }
      sent.response.resume();
      last = `${lease.upstream.id} answered ${sent.response.statusCode}`;
    } else {
      last = `${lease.upstream.id}: ${sent.endpointRefused ? REFUSAL_SHOWN_TO_CLIENTS : sent.message}`;
      if (sent.endpointRefused) endpointRefused(ctx, lease.upstream.id, sent.message);
      // A pooled keep-alive connection the upstream had closed: not the proxy's failure, and
      // not an attempt (once per request): the same lease tries again on a new connection.
      if (sent.stale && !staleRetried) {
        staleRetried = true;
        attempt--;
        ctx.agents.forget(lease.upstream);
        ctx.pool.give(lease, leaseReq.session);
        continue;
      }
    }
    await report(ctx, lease, 'unreachable', target);
    await attemptFailed(ctx, lease.upstream.id, leaseReq);
    ctx.agents.forget(lease.upstream);
    await ctx.pool.drop(lease).catch(() => undefined);
    if (req.socket.destroyed) return ctx.metrics.ended('http', 'client_gone');
    if (sent.kind === 'failed' && !mayResend(req.method!, sent.point)) {
      ctx.metrics.ended('http', 'upstream_failed');
      return replyError(res, notResent(req.method!, last));
    }
  }
  ctx.metrics.ended('http', 'upstream_failed');
  replyError(res, upstreamFailed(ctx.options.maxAttempts, last));
}

/** A request that may have reached the site through a failed upstream, not sent again. */
function notResent(method: string, last: string): GatewayError {
  return {
    status: 502,
    code: 'upstream_failed',
    message: `the upstream failed after the ${method} was sent (${last}); a ${method} is not sent again through another proxy, as it may have reached the site`,
  };
}

/**
 * The site rate-limited a request through `lease`: its pace learns from it (site-pace.ts), and
 * the book is told once per rest (a 429 to a request sent before the rest began says nothing
 * new). Without a Retry-After the book is told the pace's own rest, a moment: the pace slows
 * this upstream down, and the book's doubling cooldown (10 s, up to 120 s; for clients that keep
 * no pace) would only idle it while requests wait.
 */
function rateLimited(
  ctx: GatewayContext,
  lease: HeldLease,
  target: string,
  sentAtMs: number,
  retryAfterSeconds: number | undefined,
): void {
  const learned = ctx.paces.rateLimited(
    lease.upstream.id,
    target,
    sentAtMs,
    retryAfterSeconds === undefined ? undefined : retryAfterSeconds * 1000,
  );
  if (!learned.teaches) return;
  void report(
    ctx,
    lease,
    'rate_limited',
    target,
    retryAfterSeconds ?? Math.max(1, Math.ceil(learned.restMs / 1000)),
  );
}

/** Every upstream this request may use keeps the site's pace, and its turn comes past the wait bound. */
export function sitePaced(target: string, waitMs: number): GatewayError {
  return {
    status: 503,
    code: 'site_paced',
    message: `the upstream keeps ${target}'s pace (learned from its 429s): this request's turn comes in ${Math.ceil(waitMs / 1000)} s, past the wait bound`,
    retryAfter: Math.max(1, Math.ceil(waitMs / 1000)),
  };
}

function reject(ctx: GatewayContext, res: ServerResponse, code: 'invalid_request', message: string): void {
  ctx.metrics.ended('http', 'refused');
  replyError(res, { status: 400, code, message });
}

async function report(
  ctx: GatewayContext,
  lease: HeldLease,
  result: 'banned' | 'rate_limited' | 'unreachable',
  target: string,
  retryAfterSeconds?: number,
): Promise<void> {
  try {
    const refused = await ctx.book.report(
      lease.leaseID,
      result,
      { target, ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }) },
      lease.request.owner,
    );
    // The lease is released or paced all the same; only the book's cooldown is not recorded.
    if (refused !== undefined)
      ctx.logger.info(
        { owner: lease.request.owner, proxy: lease.upstream.id, result },
        `gateway: report refused (${refused})`,
      );
  } catch (err) {
    ctx.logger.warn({ err, proxy: lease.upstream.id, result }, 'gateway: report failed');
  }
}

function sendOnce(
  ctx: GatewayContext,
  lease: HeldLease,
  method: string,
  url: URL,
  headers: OutgoingHttpHeaders,
  body: Buffer,
): Promise<Sent> {
  const { upstream } = lease;
  const how = upstreamConnect(upstream, ctx.guard);
  if (how.kind === 'refused')
    return Promise.resolve({
      kind: 'failed',
      message: how.message,
      stale: false,
      point: 'before_sending',
      endpointRefused: true,
    });
  const { lookup } = how;
  return new Promise((resolve) => {
    const out = httpRequest({
      host: upstream.host,
      port: upstream.port,
      // Used when the agent opens a new connection; a pooled one was checked when it opened.
      ...(lookup && { lookup }),
      method,
      path: url.href,
      setHost: false,
      // A non-idempotent request gets a connection of its own: on a pooled one, a reset could
      // be the upstream's stale close or its failure after forwarding it, and only the first
      // may be sent again.
      agent: isIdempotent(method) ? ctx.agents.for(upstream) : false,
      headers:
        upstream.credentials === undefined
          ? headers
          : { ...headers, 'proxy-authorization': basicAuthorization(upstream.credentials) },
    });
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const done = (sent: Sent) => {
      clearTimeout(timer);
      if (settled) return;
      settled = true;
      resolve(sent);
    };
    // Once connected, the request is on its way: a failure from then on may come after the
    // upstream forwarded it.
    let point: FailurePoint = 'before_sending';
    // Connected: the upstream has until the response's head to answer; one that accepts and
    // then says nothing would hold the request and its lease forever.
    const awaitResponse = () => {
      point = 'after_sending';
      clearTimeout(timer);
      timer = setTimeout(
        () => out.destroy(new Error(`no response within ${ctx.options.responseTimeoutMs} ms`)),
        ctx.options.responseTimeoutMs,
      );
    };
    out.once('socket', (socket) => {
      if (!socket.connecting) return awaitResponse();
      timer = setTimeout(
        () => out.destroy(new Error(`no connection within ${ctx.options.connectTimeoutMs} ms`)),
        ctx.options.connectTimeoutMs,
      );
      socket.once('connect', awaitResponse);
    });
    out.once('response', (response) => done({ kind: 'response', response }));
    // 'on', not 'once': a request can fail twice (a timeout's destroy, then its socket's error).
    out.on('error', (err: NodeJS.ErrnoException) =>
      done(
        isUpstreamRefusal(err)
          ? { kind: 'failed', message: err.message, stale: false, point, endpointRefused: true }
          : {
              kind: 'failed',
              message: err.code ?? err.message,
              stale: out.reusedSocket && err.code === 'ECONNRESET',
              point,
            },
      ),
    );
    out.end(body.length === 0 ? undefined : body);
  });
}

/**
 * Streams the site's answer to the client; the lease goes back to the pool when it is done.
 * An upstream that cuts the answer midway cannot be hidden (the client has its first bytes):
 * the client's connection is closed, so it sees the cut, and the upstream is treated as one
 * that failed an attempt (reported unreachable, its lease dropped, its connections not reused).
 */
function relay(
  ctx: GatewayContext,
  lease: HeldLease,
  leaseReq: GatewayLeaseRequest,
  response: IncomingMessage,
  res: ServerResponse,
  reported: boolean,
  sentBytes: number,
): void {
  const raw = response.rawHeaders;
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (!HOP_BY_HOP.has(raw[i].toLowerCase())) headers.push(raw[i], raw[i + 1]);
  }
  res.writeHead(response.statusCode!, response.statusMessage, headers);
  let received = 0;
  response.on('data', (chunk: Buffer) => {
    received += chunk.length;
  });
  response.pipe(res);
  let ended = false;
  const finish = (how: 'complete' | 'client_gone' | 'upstream_cut') => {
    if (ended) return;
    ended = true;
    ctx.metrics.carried(sentBytes, received);
    ctx.metrics.ended(
      'http',
      how === 'complete' ? 'ok' : how === 'client_gone' ? 'client_gone' : 'upstream_failed',
    );
    if (how === 'upstream_cut') {
      res.destroy();
      ctx.agents.forget(lease.upstream);
      void (async () => {
        await report(ctx, lease, 'unreachable', leaseReq.target);
        await attemptFailed(ctx, lease.upstream.id, leaseReq);
        await ctx.pool.drop(lease);
      })().catch(() => undefined);
      return;
    }
    // A proxy just banned or rate-limited for this target must not carry the next request
    // there: its lease is released, not kept.
    if (reported) void ctx.pool.drop(lease).catch(() => undefined);
    else ctx.pool.give(lease, leaseReq.session);
  };
  response.once('end', () => finish('complete'));
  // Without 'end': the upstream's connection closed (or failed) before the whole answer came.
  response.once('close', () => {
    if (!response.complete) finish('upstream_cut');
  });
  res.once('close', () => {
    if (!response.complete) {
      finish('client_gone');
      response.destroy();
    } else finish('complete');
  });
}

function forwardedHeaders(req: IncomingMessage): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const listed = new Set(
    (header(req, 'connection') ?? '')
      .toLowerCase()
      .split(',')
      .map((x) => x.trim()),
  );
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (HOP_BY_HOP.has(name) || listed.has(name)) continue;
    const prior = out[name];
    out[name] = prior === undefined ? raw[i + 1] : `${String(prior)}, ${raw[i + 1]}`;
  }
  return out;
}

function header(message: IncomingMessage, name: string): string | undefined {
  const v = message.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The whole request body (kept for retries), 'too_large' past the limit, 'gone' if the client left. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer | 'too_large' | 'gone'> {
  if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) {
    req.resume();
    return Promise.resolve(Buffer.alloc(0));
  }
  if (Number(req.headers['content-length']) > limit) return Promise.resolve('too_large');
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        resolve('too_large');
        return;
      }
      chunks.push(chunk);
    });
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('aborted', () => resolve('gone'));
    req.once('error', () => resolve('gone'));
  });
}
