// Sockets the crawling process opened, by where they went: each costs a connect, a close and
// their objects, so a side that opens more per page pays for it in CPU (issue 45's profile saw
// more sockets on the integration's side than on the list's). Counted through Node's `net`
// diagnostics channels, so nothing in Crawlee, got or undici is patched.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import type { CrawlWorld } from './crawl-world.js';

/** Client sockets opened, by destination port (connected ones only), and server sockets accepted. */
export interface SocketCounts {
  /** Outgoing connections that connected, by the remote port. */
  clientByPort: Map<number, number>;
  /** Incoming connections accepted (the site and the proxies, when they run in this process). */
  accepted: number;
  /** Requests undici sent (the discovery client's calls: Crawlee's requests go through got). */
  undiciRequests: number;
}

/** Starts counting; the function returned stops and says what was counted. */
export function countSockets(): () => SocketCounts {
  const clientByPort = new Map<number, number>();
  let accepted = 0;
  const onClient = (message: unknown) => {
    const { socket } = message as { socket: Socket };
    socket.once('connect', () => {
      const port = socket.remotePort;
      if (port !== undefined) clientByPort.set(port, (clientByPort.get(port) ?? 0) + 1);
    });
  };
  let undiciRequests = 0;
  const onServer = () => void accepted++;
  const onRequest = () => void undiciRequests++;
  subscribe('net.client.socket', onClient);
  subscribe('net.server.socket', onServer);
  subscribe('undici:request:create', onRequest);
  return () => {
    unsubscribe('net.client.socket', onClient);
    unsubscribe('net.server.socket', onServer);
    unsubscribe('undici:request:create', onRequest);
    return { clientByPort, accepted, undiciRequests };
  };
}

/** Per page fetched: sockets opened by destination, sockets accepted, and discovery API calls. */
export interface SocketsPerPage {
  proxies: number;
  site: number;
  discovery: number;
  other: number;
  accepted: number;
  /** The discovery client's calls (undici's requests). */
  apiCalls: number;
}

/** Sockets per page by destination: the world's proxies, its site, the discovery API, the rest. */
export function socketsPerPage(
  { clientByPort, accepted, undiciRequests }: SocketCounts,
  pages: number,
  world: Pick<CrawlWorld, 'urls' | 'start'>,
  discoveryURL: string | undefined,
): SocketsPerPage {
  const portOf = (url: string) => Number(new URL(url).port);
  const proxies = new Set(world.urls.map(portOf));
  const site = portOf(world.start);
  const discovery = discoveryURL === undefined ? undefined : portOf(discoveryURL);
  const counts = { proxies: 0, site: 0, discovery: 0, other: 0, accepted };
  for (const [port, n] of clientByPort) {
    if (proxies.has(port)) counts.proxies += n;
    else if (port === site) counts.site += n;
    else if (port === discovery) counts.discovery += n;
    else counts.other += n;
  }
  const per = (n: number) => (pages === 0 ? 0 : n / pages);
  return {
    proxies: per(counts.proxies),
    site: per(counts.site),
    discovery: per(counts.discovery),
    other: per(counts.other),
    accepted: per(counts.accepted),
    apiCalls: per(undiciRequests),
  };
}
