// The gateway's Prometheus metrics (docs/monitoring.md), registered on the caller's registry.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/**
 * How a request or tunnel ended. ok: the upstream carried it (the site's own answer, whatever
 * its status); site_down: the upstream said the site is unreachable (502); upstream_failed:
 * every attempt's upstream failed; no_proxy: the book had none to lease; refused: the client's
 * mistake (407, 400); client_gone: the client left before an answer; store_unavailable: the
 * book could not be reached; paced: its turn at the site's pace came past the wait bound;
 * idle: a tunnel closed by the gateway after carrying nothing for the tunnel idle timeout.
 */
export type GatewayOutcome =
  | 'ok'
  | 'site_down'
  | 'upstream_failed'
  | 'no_proxy'
  | 'paced'
  | 'refused'
  | 'client_gone'
  | 'store_unavailable'
  | 'idle';
export const GATEWAY_OUTCOMES: readonly GatewayOutcome[] = [
  'ok',
  'site_down',
  'upstream_failed',
  'no_proxy',
  'paced',
  'refused',
  'client_gone',
  'store_unavailable',
  'idle',
];

export type Carrier = 'http' | 'tunnel';

export class GatewayMetrics {
  private readonly outcomes = new Map<string, { inc(): void }>();
  private readonly retries: Record<Carrier, { inc(): void }>;
  private readonly bytesIn: { inc(n: number): void };
  private readonly bytesOut: { inc(n: number): void };
  private readonly added: Record<Carrier, { observe(v: number): void }>;
  private readonly tunnels: Gauge;
  private readonly shares: Record<Carrier, { inc(): void }>;
  private readonly pacedRequests: { inc(): void };
  private readonly paceWait: { observe(v: number): void };

  constructor(registry: Registry, leasesHeld: () => number) {
    const requests = new Counter({
      name: 'proxy_operator_gateway_requests_total',
      help: 'Plain-HTTP requests through the gateway, by outcome',
      labelNames: ['outcome'],
      registers: [registry],
    });
    const tunnels = new Counter({
      name: 'proxy_operator_gateway_tunnels_total',
      help: 'CONNECT tunnels through the gateway, by outcome',
      labelNames: ['outcome'],
      registers: [registry],
    });
    for (const outcome of GATEWAY_OUTCOMES) {
      this.outcomes.set(`http/${outcome}`, requests.labels(outcome));
      this.outcomes.set(`tunnel/${outcome}`, tunnels.labels(outcome));
    }
    const retries = new Counter({
      name: 'proxy_operator_gateway_upstream_retries_total',
      help: 'Attempts retried through another upstream after one failed before a byte reached the client',
      labelNames: ['carrier'],
      registers: [registry],
    });
    this.retries = { http: retries.labels('http'), tunnel: retries.labels('tunnel') };
    const bytes = new Counter({
      name: 'proxy_operator_gateway_bytes_total',
      help: 'Bytes carried between clients and upstreams (body and tunnel bytes), by direction',
      labelNames: ['direction'],
      registers: [registry],
    });
    this.bytesIn = bytes.labels('from_client');
    this.bytesOut = bytes.labels('to_client');
    this.tunnels = new Gauge({
      name: 'proxy_operator_gateway_open_tunnels',
      help: 'CONNECT tunnels open now',
      registers: [registry],
    });
    new Gauge({
      name: 'proxy_operator_gateway_leases_held',
      help: 'Leases this gateway holds now (carrying a request or tunnel, or idle for reuse)',
      registers: [registry],
      collect() {
        this.set(leasesHeld());
      },
    });
    const shares = new Counter({
      name: 'proxy_operator_gateway_shared_leases_total',
      help: 'Requests and tunnels that joined a lease the gateway already held because the book was full (all_busy)',
      labelNames: ['carrier'],
      registers: [registry],
    });
    this.shares = { http: shares.labels('http'), tunnel: shares.labels('tunnel') };
    this.pacedRequests = new Counter({
      name: 'proxy_operator_gateway_paced_requests_total',
      help: "Plain-HTTP requests the site's pace held for their turn (its rate learned from the site's 429s)",
      registers: [registry],
    });
    this.paceWait = new Histogram({
      name: 'proxy_operator_gateway_pace_wait_seconds',
      help: "How long the site's pace held a request for its turn",
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    const added = new Histogram({
      name: 'proxy_operator_gateway_added_latency_seconds',
      help: "Time the gateway spends before a request or CONNECT leaves for its upstream (authentication, lease, retries): what it adds to the client's latency",
      labelNames: ['carrier'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 5],
      registers: [registry],
    });
    this.added = { http: added.labels('http'), tunnel: added.labels('tunnel') };
  }

  ended(carrier: Carrier, outcome: GatewayOutcome): void {
    this.outcomes.get(`${carrier}/${outcome}`)!.inc();
  }

  shared(carrier: Carrier): void {
    this.shares[carrier].inc();
  }

  /** A request the site's pace held for `seconds` before its turn. */
  paced(seconds: number): void {
    this.pacedRequests.inc();
    this.paceWait.observe(seconds);
  }

  retried(carrier: Carrier): void {
    this.retries[carrier].inc();
  }

  carried(fromClient: number, toClient: number): void {
    if (fromClient > 0) this.bytesIn.inc(fromClient);
    if (toClient > 0) this.bytesOut.inc(toClient);
  }

  addedLatency(carrier: Carrier, seconds: number): void {
    this.added[carrier].observe(seconds);
  }

  tunnelOpened(): void {
    this.tunnels.inc();
  }

  tunnelClosed(): void {
    this.tunnels.dec();
  }
}
