import { performance } from 'node:perf_hooks';
import { createSecureContext, type SecureContext } from 'node:tls';
import { ProxyAgent } from 'undici';
import type { ProbeTarget } from './probe-target.js';
import { ProbeReason, type ProbeOutcome } from './probe-reason.js';
import { classifyProbeError } from './classify-probe-error.js';
import type { Prober } from './prober.js';

export interface UndiciProberOptions {
  /** Extra trust for the TARGET's certificate (tests); production uses the system CAs. */
  tls?: { ca?: string | Buffer | Array<string | Buffer> };
  userAgent?: string;
}

function proxyURI(target: ProbeTarget): string {
  const host = target.host.includes(':') && !target.host.startsWith('[') ? `[${target.host}]` : target.host;
  return `http://${host}:${target.port}`;
}

/**
 * Fetches the probe URL THROUGH the proxy with an undici ProxyAgent built for that one
 * probe and destroyed after it. An https probe URL goes through a CONNECT tunnel; an http
 * one is sent as an absolute-URI request to the proxy.
 *
 * Every probe uses a fresh connection (`reset: true`): a kept-alive tunnel would let a
 * proxy that can no longer open NEW connections look healthy, and at a 10 s interval the
 * target would mostly have closed the idle connection anyway. So an agent kept between
 * probes would hold nothing worth keeping, yet cost ~40 KB of heap per proxy (its pools'
 * 2,048-slot request queues, connectors, session caches): agents live only while probing,
 * so their number follows probes in flight, not the fleet.
 */
export class UndiciProber implements Prober {
  /** The agents of probes in flight, by proxy key; an entry lives exactly as long as its probe. */
  private readonly agents = new Map<string, ProxyAgent>();
  /** Built once: passing `ca` per connection would re-parse it on every TLS handshake. */
  private readonly secureContext: SecureContext | undefined;

  constructor(private readonly options: UndiciProberOptions = {}) {
    this.secureContext = options.tls?.ca ? createSecureContext({ ca: options.tls.ca }) : undefined;
  }

  async probe(target: ProbeTarget, cancel: AbortSignal): Promise<ProbeOutcome> {
    const timeoutMillis = target.timeoutSeconds * 1000;
    // One controller for both deadline and cancellation (cheaper than AbortSignal.any per probe).
    const abort = new AbortController();
    const signal = abort.signal;
    let timedOut = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      abort.abort(new Error(`probe deadline of ${target.timeoutSeconds}s passed`));
    }, timeoutMillis);
    const onCancel = (): void => abort.abort(cancel.reason);
    if (cancel.aborted) onCancel();
    else cancel.addEventListener('abort', onCancel, { once: true });
    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    let agent: ProxyAgent | undefined;
    try {
      const url = new URL(target.probeURL);
      agent = this.agentFor(target);
      this.agents.set(target.key, agent);
      const response = await agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'GET',
        headers: { 'user-agent': this.options.userAgent ?? 'proxy-operator-health' },
        signal,
        reset: true,
        headersTimeout: timeoutMillis,
        bodyTimeout: timeoutMillis,
      });
      // Always drain: an unread body pins the socket and leaks memory.
      await response.body.dump({ signal, limit: 64 * 1024 });
      const durationMillis = elapsed();
      if (target.expectedStatusCodes.includes(response.statusCode)) {
        return {
          success: true,
          reason: ProbeReason.ProbeSucceeded,
          message: `status ${response.statusCode}`,
          durationMillis,
        };
      }
      return {
        success: false,
        reason: ProbeReason.UnexpectedStatus,
        message: `status ${response.statusCode}, expected one of ${target.expectedStatusCodes.join(', ')}`,
        durationMillis,
      };
    } catch (err) {
      const { reason, message } = classifyProbeError(err, timedOut && !cancel.aborted);
      return { success: false, reason, message, durationMillis: elapsed() };
    } finally {
      clearTimeout(deadline);
      cancel.removeEventListener('abort', onCancel);
      // Destroyed, not closed, after every probe: an aborted CONNECT leaves its socket to the
      // proxy open (undici does not close it), and a black-holed proxy would never close it.
      if (agent) this.discard(target.key, agent);
    }
  }

  /** Closes the connections of the proxy's probe in flight, if any. */
  async release(key: string): Promise<void> {
    const agent = this.agents.get(key);
    if (!agent) return;
    this.agents.delete(key);
    await closeQuietly(agent);
  }

  /** Drops `agent` — but never a newer probe's agent for the key (endpoint changed meanwhile). */
  private discard(key: string, agent: ProxyAgent): void {
    if (this.agents.get(key) === agent) this.agents.delete(key);
    void closeQuietly(agent);
  }

  async close(): Promise<void> {
    const all = [...this.agents.values()];
    this.agents.clear();
    await Promise.all(all.map(closeQuietly));
  }

  /** Agents in flight (tests and benchmarks: it must follow probes in flight, not the fleet). */
  get liveAgents(): number {
    return this.agents.size;
  }

  private agentFor(target: ProbeTarget): ProxyAgent {
    return new ProxyAgent({
      uri: proxyURI(target),
      // One probe per agent, so one connection is all it ever needs.
      connections: 1,
      connectTimeout: target.timeoutSeconds * 1000,
      requestTls: this.secureContext ? { secureContext: this.secureContext } : undefined,
    });
  }
}

async function closeQuietly(agent: ProxyAgent): Promise<void> {
  // destroy, not close: close would wait for an in-flight (possibly black-holed) request.
  await agent.destroy().catch(() => undefined);
}
