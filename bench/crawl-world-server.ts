// A crawl's proxies and site in a process of their own (`bench:crawl -- --world-apart`), as a
// real fleet and a real site are other machines; the crawling process drives it through
// crawl-world-process.ts over Node's IPC channel.
//
// Protocol: the parent passes a WorldConfig as JSON in argv[2]; this process answers
// { ready } once its fleet and site are up, then each WorldRequest with a WorldReply of the
// same id; it exits when the parent disconnects.
import { startCrawlSite } from './crawl-site.js';
import { startFleet } from './crawl-world.js';
import type { WorldConfig, WorldMessage, WorldRequest } from './crawl-world-process.js';

const send = (message: WorldMessage) => process.send!(message);

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as WorldConfig;
  const fleet = await startFleet(config.proxies, config.first);
  const site = await startCrawlSite({
    pages: config.pages,
    ...(config.rateLimitPerSecond === undefined ? {} : { rateLimitPerSecond: config.rateLimitPerSecond }),
    retryAfterSeconds: config.retryAfterSeconds,
  });
  process.on('message', (raw) => {
    const request = raw as WorldRequest;
    if ('ban' in request) {
      for (const host of request.ban) site.ban(host);
      send({ id: request.id, done: Date.now() });
    } else if ('kill' in request) {
      const at = Date.now();
      for (const i of request.kill) void fleet.proxies[i].close();
      send({ id: request.id, done: at });
    } else if ('cpu' in request) {
      const { user, system } = process.cpuUsage();
      send({ id: request.id, cpuMs: (user + system) / 1000 });
    } else {
      send({ id: request.id, record: { hits: site.hits, firstRefusal: [...site.firstRefusal] } });
    }
  });
  process.once('disconnect', () => {
    void Promise.allSettled([fleet.close(), site.close()]).then(() => process.exit(0));
  });
  send({
    ready: {
      urls: fleet.urls,
      hosts: fleet.proxies.map((p) => p.host),
      ports: fleet.proxies.map((p) => p.port),
      start: site.start,
    },
  });
}

main().catch((err: unknown) => {
  send({ error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
});
