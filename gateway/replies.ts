// The gateway's own answers (never an upstream's or a site's): a JSON body {error, message},
// as the discovery API's, and the same code and message in a header, because many clients show
// a proxy's status line and headers but not its body (curl -v, requests' ProxyError).
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

export type GatewayErrorCode =
  | 'proxy_auth_required'
  | 'malformed_credentials'
  | 'invalid_token'
  | 'too_many_requests'
  | 'no_tokens_configured'
  | 'invalid_username'
  | 'invalid_request'
  | 'request_timeout'
  | 'headers_too_large'
  | 'not_found'
  | 'method_not_allowed'
  | 'payload_too_large'
  | 'no_match'
  | 'all_busy'
  | 'all_cooling_down'
  | 'site_paced'
  | 'site_unreachable'
  | 'upstream_failed'
  | 'session_not_held'
  | 'store_unavailable'
  | 'lease_quota'
  | 'cooldown_quota';

/** The header every gateway error carries: `<code>: <message>`. */
export const ERROR_HEADER = 'X-Gateway-Error';

export interface GatewayError {
  status: number;
  code: GatewayErrorCode;
  message: string;
  /** Seconds, for 503s the client may retry later. */
  retryAfter?: number;
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  404: 'Not Found',
  405: 'Method Not Allowed',
  407: 'Proxy Authentication Required',
  408: 'Request Timeout',
  413: 'Payload Too Large',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

function headersOf(error: GatewayError, body: string): Record<string, string> {
  return {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
    // Header values are Latin-1 and one line: what a username echoes is made safe here.
    [ERROR_HEADER]: `${error.code}: ${error.message}`.replace(/[^\x20-\x7e]/g, '?').slice(0, 1024),
    ...(error.status === 407 ? { 'Proxy-Authenticate': 'Basic realm="proxy-operator gateway"' } : {}),
    ...(error.retryAfter === undefined ? {} : { 'Retry-After': String(error.retryAfter) }),
  };
}

export function replyError(res: ServerResponse, error: GatewayError): void {
  const body = JSON.stringify({ error: error.code, message: error.message });
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(error.status, headersOf(error, body));
  res.end(body);
}

/** The same answer written on a CONNECT's raw socket, which is then closed. */
export function replyErrorOnSocket(socket: Duplex, error: GatewayError): void {
  const body = JSON.stringify({ error: error.code, message: error.message });
  const headers = Object.entries({ ...headersOf(error, body), Connection: 'close' })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(`HTTP/1.1 ${error.status} ${REASONS[error.status] ?? 'Error'}\r\n${headers}\r\n${body}`);
}

/**
 * The answer to a request Node's parser refused before the gateway saw it (its 'clientError'):
 * the same JSON and header as every other answer of the gateway's own. Pure.
 */
export function clientErrorReply(code: string | undefined, headersTimeoutMs: number): GatewayError {
  if (code === 'HPE_HEADER_OVERFLOW')
    return {
      status: 431,
      code: 'headers_too_large',
      message: "the request head is larger than Node's limit (--max-http-header-size, 16 KiB by default)",
    };
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return {
      status: 408,
      code: 'request_timeout',
      message: `no whole request head within ${Math.round(headersTimeoutMs / 1000)} s`,
    };
  return {
    status: 400,
    code: 'invalid_request',
    message: `not an HTTP/1.1 request the gateway can read (${code ?? 'parse error'})`,
  };
}
