// The JSON shapes of proxies and leases on the wire.
import type { ProxyRecord } from './catalog.js';
import type { Lease } from './lease-store.js';

export interface ProxyView {
  id: string;
  ip: string;
  port: number;
  attributes: Record<string, string>;
  phase: string;
  healthy: boolean;
  latencyMillis: number;
  activeLeases: number;
  maxLeases: number;
}

export interface LeasedProxyView extends ProxyView {
  /** Ready to hand to an HTTP client as its proxy, e.g. http://203.0.113.7:3128. */
  url: string;
}

export interface LeaseView {
  leaseID: string;
  proxy: LeasedProxyView;
  expiresAt: string;
  target: string | null;
}

export function toProxyView(proxy: ProxyRecord, activeLeases: number): ProxyView {
  const { id, ip, port, attributes, phase, healthy, latencyMillis, maxLeases } = proxy;
  return { id, ip, port, attributes, phase, healthy, latencyMillis, activeLeases, maxLeases };
}

export function toLeaseView(lease: Lease, proxy: ProxyRecord, activeLeases: number): LeaseView {
  return {
    leaseID: lease.id,
    proxy: { ...toProxyView(proxy, activeLeases), url: proxyURL(proxy.ip, proxy.port) },
    expiresAt: lease.expiresAt.toISOString(),
    target: lease.target ?? null,
  };
}

export function proxyURL(ip: string, port: number): string {
  return `http://${ip.includes(':') ? `[${ip}]` : ip}:${port}`;
}
