// Reporting from inside a tunnel. The site's answer in a CONNECT tunnel is encrypted, so the
// client tells the gateway: `POST /v1/sessions/{session}/report` on the gateway's own port,
// with {target, result, retryAfterSeconds?}. The report applies to the lease this gateway
// holds for that session and target (the tunnel's own, open or idle); the session's next
// tunnel to that target then goes through another proxy.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { targetName } from '../book/target-name.js';
import { storeUnavailable, type GatewayContext } from './gateway-context.js';
import type { GatewayReport } from './ports.js';
import { replyError } from './replies.js';
import { parseUsername } from './username.js';

const ROUTE = /^\/v1\/sessions\/([^/?]+)\/report$/;
const RESULTS: readonly GatewayReport[] = ['banned', 'rate_limited', 'unreachable'];
const MAX_BODY = 4096;

export type ReportBody = { target: string; result: GatewayReport; retryAfterSeconds?: number };

/** Parses the report body; a message naming the field when it is wrong. Pure. */
export function parseReportBody(text: string): ReportBody | string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return 'the body must be JSON: {"target": "<host>", "result": "banned" | "rate_limited" | "unreachable"}';
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return 'the body must be a JSON object';
  const { target, result, retryAfterSeconds, ...rest } = body as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0)
    return `unknown field "${extra[0].slice(0, 64)}" (expected target, result, retryAfterSeconds)`;
  if (typeof target !== 'string') return 'target must be the host name the tunnel was opened to';
  // The book's rule and words: a URL or host:port is refused with the host name meant.
  const named = targetName(target);
  if (!named.ok) return named.message;
  const host = named.target;
  if (!RESULTS.includes(result as GatewayReport)) return `result must be one of ${RESULTS.join(', ')}`;
  if (
    retryAfterSeconds !== undefined &&
    !(typeof retryAfterSeconds === 'number' && Number.isInteger(retryAfterSeconds) && retryAfterSeconds >= 0)
  )
    return 'retryAfterSeconds must be a whole number of seconds';
  return {
    target: host,
    result: result as GatewayReport,
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds: retryAfterSeconds as number }),
  };
}

/** Whether a request to the gateway itself (origin-form) is this route. */
export function sessionOfReportPath(path: string): string | undefined {
  const m = ROUTE.exec(path);
  if (m === null) return undefined;
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return undefined;
  }
}

export async function reportBySession(
  ctx: GatewayContext,
  req: IncomingMessage,
  res: ServerResponse,
  owner: string,
  session: string,
): Promise<void> {
  if (req.method !== 'POST') {
    res.setHeader('Allow', 'POST');
    return replyError(res, {
      status: 405,
      code: 'method_not_allowed',
      message: `${req.method} is not allowed here; use POST`,
    });
  }
  const key = parseUsername(`session-${encodeURIComponent(session).replace(/-/g, '%2D')}`, {
    attributeKeys: new Set(),
    maxTTLSeconds: ctx.options.maxTTLSeconds,
  });
  if (!key.ok) return replyError(res, { status: 400, code: 'invalid_request', message: key.message });
  const text = await readText(req);
  if (text === undefined)
    return replyError(res, {
      status: 413,
      code: 'payload_too_large',
      message: `a report body is at most ${MAX_BODY} bytes`,
    });
  const body = parseReportBody(text);
  if (typeof body === 'string')
    return replyError(res, { status: 400, code: 'invalid_request', message: body });
  // Whatever selector or TTL the session's tunnels were opened with.
  const held = ctx.pool.heldFor(owner, `gw:${session}@${body.target}`);
  if (held.length === 0)
    return replyError(res, {
      status: 404,
      code: 'session_not_held',
      message: `this gateway holds no lease of session "${session}" for ${body.target} (its tunnel closed more than the idle time ago, or it went through another replica): start a new session id instead`,
    });
  const details = {
    target: body.target,
    ...(body.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: body.retryAfterSeconds }),
  };
  try {
    const refused = await ctx.book.report(held[0].leaseID, body.result, details, owner);
    if (refused === 'cooldown_quota')
      return replyError(res, {
        status: 429,
        code: 'cooldown_quota',
        message: `token "${owner}" keeps its quota of running cooldowns: nothing was recorded (its running bans still hold); start a new session id to move`,
        retryAfter: 60,
      });
  } catch (err) {
    // Redis down: the 503 requests and tunnels get, not a bare 500; the lease stays as it was.
    ctx.logger.debug({ err }, 'gateway: the lease book cannot be reached');
    return replyError(res, storeUnavailable());
  }
  // No lease of this session may carry its next tunnel to that target through this proxy.
  for (const lease of held) ctx.pool.retire(lease);
  // A ban or rate limit rests the proxy for that target: no session this gateway holds there
  // (those sharing the lease included) goes on through it.
  if (body.result !== 'unreachable') ctx.pool.retireProxy(held[0].upstream.id, body.target);
  res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8' });
  res.end(JSON.stringify({ session, target: body.target, result: body.result, proxy: held[0].upstream.id }));
}

function readText(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.once('end', () => resolve(size > MAX_BODY ? undefined : Buffer.concat(chunks).toString('utf8')));
    req.once('error', () => resolve(undefined));
  });
}
