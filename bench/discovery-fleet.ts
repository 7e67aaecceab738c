// What bench/discovery.ts and its server child share: the fleet and their messages.
import type { ProxyRecord } from '../book/catalog.js';

export type ServeCommand =
  | { serve: 'node-hello' }
  | { serve: 'express-hello' }
  | { serve: 'discovery'; proxies: number; sessions: number; token: string; redisUrl?: string };

export type ServerReply =
  { ready: true; port: number; sessionsBound?: number } | { cpuMicros: number } | { error: string };

export const GEOS = ['eu', 'us', 'ap', 'sa', 'af'];

/** N proxies, 10 % unhealthy, five geos, two purposes, latencies spread over 20–420 ms. */
export function fleet(count: number): ProxyRecord[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `bench/proxy-${String(i).padStart(5, '0')}`,
    ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    port: 3128,
    attributes: { geo: GEOS[i % GEOS.length], purpose: i % 2 === 0 ? 'crawl' : 'api' },
    phase: i % 10 === 9 ? 'Unhealthy' : 'Ready',
    healthy: i % 10 !== 9,
    latencyMillis: 20 + ((i * 37) % 400),
    maxLeases: 5,
  }));
}
