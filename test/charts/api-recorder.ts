import { createServer, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** One request a client made through the recorder, as RBAC sees it. */
export interface RecordedCall {
  method: string;
  path: string;
  status: number;
  /** RBAC's attributes of the request: "verb group/resource[/subresource]@namespace" ('*' = cluster). */
  key: string;
}

export interface ApiRecorder {
  /** Where a client reaches the API server through the recorder: http://127.0.0.1:<port>. */
  url: string;
  calls: RecordedCall[];
  close(): Promise<void>;
}

const VERBS: Record<string, (named: boolean, watch: boolean) => string> = {
  GET: (named, watch) => (named ? 'get' : watch ? 'watch' : 'list'),
  POST: () => 'create',
  PUT: () => 'update',
  PATCH: () => 'patch',
  DELETE: (named) => (named ? 'delete' : 'deletecollection'),
};

/** The RBAC attributes of a REST request: /api/v1/... or /apis/<group>/<version>/... */
export function rbacKey(method: string, path: string): string {
  const url = new URL(path, 'http://x');
  const parts = url.pathname.split('/').filter(Boolean);
  const [group, rest] = parts[0] === 'api' ? ['', parts.slice(2)] : [parts[1], parts.slice(3)];
  const namespaced = rest[0] === 'namespaces' && rest.length >= 3;
  const [namespace, resource, name, sub] = namespaced
    ? [rest[1], rest[2], rest[3], rest[4]]
    : [undefined, rest[0], rest[1], rest[2]];
  const watch = ['true', '1'].includes(url.searchParams.get('watch') ?? '');
  const verb = (VERBS[method] ?? (() => method.toLowerCase()))(name !== undefined, watch);
  return `${verb} ${group}/${resource}${sub === undefined ? '' : `/${sub}`}@${namespace ?? '*'}`;
}

/**
 * A plain-HTTP forwarder on loopback to the API server of `admin` (whose CA it trusts), that
 * records every request and its status. The client brings its own credentials (a
 * ServiceAccount token): the recorder adds none.
 */
export async function startApiRecorder(admin: KubeConfig): Promise<ApiRecorder> {
  const cluster = admin.getCurrentCluster()!;
  const upstream = new URL(cluster.server);
  const ca = cluster.caData ? Buffer.from(cluster.caData, 'base64') : undefined;
  const calls: RecordedCall[] = [];
  const server: Server = createServer((req, res) => {
    const up = httpsRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
        ca,
      },
      (answer) => {
        const method = req.method ?? 'GET';
        const path = req.url ?? '/';
        calls.push({ method, path, status: answer.statusCode ?? 0, key: rbacKey(method, path) });
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
