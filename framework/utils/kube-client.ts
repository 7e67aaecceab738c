import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { Agent, fetch, type Dispatcher } from 'undici';
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';

/** An API error carrying the HTTP status, so callers can branch on 404/409/410. */
export class KubeApiError extends Error {
  constructor(
    message: string,
    readonly statusCode: number,
    readonly body?: unknown,
  ) {
    super(message);
    this.name = 'KubeApiError';
  }
}

export function isStatus(err: unknown, code: number): boolean {
  return err instanceof KubeApiError && err.statusCode === code;
}

export type Query = Record<string, string | number | boolean | undefined>;

export const MERGE_PATCH = 'application/merge-patch+json';

/**
 * A minimal JSON REST client over the KubeConfig's credentials. The framework talks to
 * arbitrary kinds (any group, core or not, main resource or /status), which the generated
 * per-group clients make awkward; one small request/stream pair covers all of it.
 */
export class KubeClient {
  private dispatcher?: Dispatcher;

  constructor(private readonly kubeConfig: KubeConfig) {}

  private async prepare(
    method: HttpMethod,
    path: string,
    query: Query,
  ): Promise<{ url: URL; ctx: RequestContext }> {
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const url = new URL(cluster.server.replace(/\/$/, '') + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
    const ctx = new RequestContext(url.toString(), method);
    await this.kubeConfig.applySecurityAuthentication(ctx);
    this.dispatcher ??= await this.agent();
    return { url, ctx };
  }

  /**
   * One connection pool for every request, HTTP/1.1 only: the KubeConfig's own agent builds
   * a new pool per request and lets undici negotiate HTTP/2, whose idle-session timeout
   * surfaced as an unhandled 'error' event in our tests.
   */
  private async agent(): Promise<Dispatcher> {
    const tls: {
      ca?: Buffer | string;
      cert?: Buffer | string;
      key?: Buffer | string;
      rejectUnauthorized?: boolean;
    } = {};
    await this.kubeConfig.applyToHTTPSOptions(tls);
    return new Agent({
      allowH2: false,
      connect: { ca: tls.ca, cert: tls.cert, key: tls.key, rejectUnauthorized: tls.rejectUnauthorized },
    });
  }

  async request<T>(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    opts: { query?: Query; body?: unknown; contentType?: string; signal?: AbortSignal } = {},
  ): Promise<T> {
    const { url, ctx } = await this.prepare(method as HttpMethod, path, opts.query ?? {});
    const headers = ctx.getHeaders();
    if (opts.body !== undefined) headers['Content-Type'] = opts.contentType ?? 'application/json';
    headers['Accept'] = 'application/json';
    const res = await fetch(url, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      dispatcher: this.dispatcher,
      signal: opts.signal ?? AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    const parsed: unknown = text ? safeJson(text) : undefined;
    if (res.status >= 400) {
      const message = (parsed as { message?: string } | undefined)?.message ?? text;
      throw new KubeApiError(`${method} ${path}: ${res.status} ${message}`, res.status, parsed);
    }
    return parsed as T;
  }

  /**
   * Opens a watch and calls onEvent per line. Resolves when the stream ends (normally or by
   * `signal`); rejects on HTTP or network errors.
   */
  async watch(
    path: string,
    query: Query,
    onEvent: (event: unknown) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const { url, ctx } = await this.prepare(HttpMethod.GET, path, { ...query, watch: true });
    // Aborted in `finally` so that a throwing onEvent also closes the connection.
    const local = new AbortController();
    const res = await fetch(url, {
      method: 'GET',
      headers: ctx.getHeaders(),
      dispatcher: this.dispatcher,
      signal: AbortSignal.any([signal, local.signal]),
    });
    if (res.status !== 200 || !res.body) {
      const text = await res.text().catch(() => '');
      throw new KubeApiError(`WATCH ${path}: ${res.status} ${text}`, res.status);
    }
    const lines = createInterface(Readable.fromWeb(res.body));
    try {
      for await (const line of lines) {
        if (line.trim() === '') continue;
        onEvent(safeJson(line));
      }
    } catch (err) {
      if (!signal.aborted) throw err;
    } finally {
      local.abort();
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text };
  }
}
