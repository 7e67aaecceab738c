import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on a free loopback port; the URL proxies probe on it. */
export async function listenForProbes(s: Server): Promise<string> {
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}/generate_204`;
}
