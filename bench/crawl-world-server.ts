// A crawl's proxies and site in a process of their own (`bench:crawl -- --world-apart`), as a
// real fleet and a real site are other machines; the crawling process drives it through
// crawl-world-process.ts over Node's IPC channel.
//
// Protocol: the parent passes a WorldConfig as JSON in argv[2]; this process answers
// { ready } once its fleet and site are up, then each WorldRequest with a WorldReply of the
// same id; it exits when the parent disconnects.
import { startLocalWorld, type WorldConfig } from './crawl-world.js';
import type { WorldMessage, WorldRequest } from './crawl-world-process.js';

const send = (message: WorldMessage) => process.send!(message);

async function main(): Promise<void> {
  const world = await startLocalWorld(JSON.parse(process.argv[2] ?? '') as WorldConfig);
  process.on('message', (raw) => {
    const request = raw as WorldRequest;
    void answer(request).then(
      (message) => send(message),
      (err: unknown) => send({ error: err instanceof Error ? err.message : String(err) }),
    );
  });
  const answer = async (request: WorldRequest): Promise<WorldMessage> => {
    if ('ban' in request) {
      await world.ban(request.ban);
      return { id: request.id, done: Date.now() };
    }
    if ('kill' in request) return { id: request.id, done: await world.kill(request.kill) };
    if ('cpu' in request) {
      const { user, system } = process.cpuUsage();
      return { id: request.id, cpuMs: (user + system) / 1000 };
    }
    const { hits, firstRefusal } = await world.record();
    return { id: request.id, record: { hits, firstRefusal: [...firstRefusal] } };
  };
  process.once('disconnect', () => void world.close().finally(() => process.exit(0)));
  send({ ready: { urls: world.urls, hosts: world.hosts, ports: world.ports, start: world.start } });
}

main().catch((err: unknown) => {
  send({ error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
});
