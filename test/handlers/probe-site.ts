import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on a free loopback port; the URL proxies probe on it. */
export async function listenForProbes(s: Server): Promise<string> {
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}/generate_204`;
}

/** A probe site's answer: a 204, or, while `down()` says so, a connection dropped unanswered. */
export function downWhen(down: () => boolean): RequestListener {
  return (req, res) => {
    if (down()) {
      req.socket.destroy();
      return;
    }
    res.writeHead(204).end();
  };
}

/** The two probe sites of a suite whose teams each probe their own: A's and B's URLs. */
export interface TwoSites {
  urlA: string;
  urlB: string;
}

/**
 * Two probe sites on loopback, with the suite's hooks: site A answers as `answerA` does, site B
 * always 204. The URLs are set from the suite's beforeAll on; both close in its afterAll.
 */
export function twoProbeSites(answerA: RequestListener): TwoSites {
  const sites: TwoSites = { urlA: '', urlB: '' };
  const servers = [createServer(answerA), createServer((_req, res) => res.writeHead(204).end())];
  beforeAll(async () => {
    [sites.urlA, sites.urlB] = await Promise.all(servers.map(listenForProbes));
  });
  afterAll(async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((resolve) => s.close(resolve));
    }
  });
  return sites;
}
