// The server side of `npm run bench:discovery`, run in its own process (forked by
// bench/discovery.ts) so that the load generator never shares its event loop. Each command
// starts one more server, all kept until `stop`: a bare node:http hello world, an express
// hello world (POST with a JSON body, the discovery server's own framework and server
// wrapper), or the discovery API over a fleet of N proxies with S sessions bound, its book in
// memory or in the bench's redis-server. Only the
// server under load does work at any moment.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { createDiscoveryApp } from '../discovery/app.js';
import { IndexedCatalog } from '../book/indexed-catalog.js';
import type { LeaseStore } from '../book/lease-store.js';
import { MemoryLeaseStore } from '../book/memory-lease-store.js';
import { connectRedis, whenReady } from '../book/redis-connection.js';
import { RedisLeaseStore } from '../book/redis-lease-store.js';
import { DiscoveryServer } from '../discovery/server.js';
import { fleet, type ServeCommand, type ServerReply } from './discovery-fleet.js';

const logger = pino({ level: 'silent' });
const running: (() => Promise<void>)[] = [];

async function serve(command: ServeCommand): Promise<ServerReply> {
  switch (command.serve) {
    case 'node-hello': {
      const server: Server = createServer((_req, res) => res.end('hello'));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      running.push(() => new Promise((resolve) => server.close(() => resolve())));
      return { ready: true, port: (server.address() as AddressInfo).port };
    }
    case 'express-hello': {
      const app = express();
      app.disable('x-powered-by');
      app.disable('etag');
      app.post('/hello', express.json(), (req, res) => {
        res.json({ hello: 'world', got: req.body as unknown });
      });
      const server = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, logger);
      await server.start();
      running.push(() => server.stop());
      return { ready: true, port: server.port };
    }
    case 'discovery': {
      const catalog = new IndexedCatalog();
      catalog.replaceAll(fleet(command.proxies));
      let leases: LeaseStore;
      if (command.redisUrl === undefined) {
        leases = new MemoryLeaseStore({ catalog, logger });
      } else {
        const redis = connectRedis({ url: command.redisUrl, logger, timeoutMs: 5000 });
        await whenReady(redis);
        leases = new RedisLeaseStore({ redis, catalog, logger, keyPrefix: `bench-http-${command.proxies}` });
      }
      await leases.start();
      const sessionsBound = await bindSessions(leases, command.sessions);
      const app = createDiscoveryApp({
        catalog,
        leases,
        token: command.token,
        logger,
        registry: new Registry(),
      });
      const server = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, logger);
      await server.start();
      running.push(async () => {
        await server.stop();
        await leases.stop();
      });
      return { ready: true, port: server.port, sessionsBound };
    }
  }
}

/**
 * Binds `count` sessions the way a crawler fleet would: each while the others still hold
 * their leases (so least-loaded selection spreads them), then releases every lease. The
 * bindings stay (sessions live 30 minutes idle).
 */
async function bindSessions(leases: LeaseStore, count: number): Promise<number> {
  const held: string[] = [];
  for (let i = 0; i < count; i++) {
    const result = await leases.acquire({ selector: {}, ttlSeconds: 600, session: `session-${i}` });
    if (result.granted) held.push(result.lease.id);
  }
  for (const id of held) await leases.release(id);
  return (await leases.totals()).activeSessions;
}

const send = (message: ServerReply | { started: true }) => {
  if (process.send === undefined)
    throw new Error('bench/discovery-server runs as a child of bench/discovery');
  process.send(message);
};

process.on('message', (command: ServeCommand | { stop: true } | { cpu: true }) => {
  if ('cpu' in command) {
    const { user, system } = process.cpuUsage();
    send({ cpuMicros: user + system });
    return;
  }
  if ('stop' in command) {
    void Promise.all(running.map((stop) => stop())).then(() => process.exit(0));
    return;
  }
  serve(command).then(send, (err: unknown) => send({ error: String(err) }));
});
send({ started: true });
