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

interface AgentEntry {
  proxyURI: string;
  agent: ProxyAgent;
}

function proxyURI(target: ProbeTarget): string {
  const host = target.host.includes(':') && !target.host.startsWith('[') ? `[${target.host}]` : target.host;
  return `http://${host}:${target.port}`;
}

/**
 * Fetches the probe URL THROUGH the proxy with one undici ProxyAgent per proxy, reused
 * between probes. An https probe URL goes through a CONNECT tunnel; an http one is sent as
 * an absolute-URI request to the proxy.
 *
 * Every probe uses a fresh connection (`reset: true`): a kept-alive tunnel would let a
 * proxy that can no longer open NEW connections look healthy, and at a 10 s interval the
 * target would mostly have closed the idle connection anyway.
 */
export class UndiciProber implements Prober {
  private readonly agents = new Map<string, AgentEntry>();
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
      // An aborted CONNECT leaves its socket to the proxy open (undici does not close it), and
      // a black-holed proxy would never close it either: discard the agent so nothing leaks.
      if (agent) this.discard(target.key, agent);
      const { reason, message } = classifyProbeError(err, timedOut && !cancel.aborted);
      return { success: false, reason, message, durationMillis: elapsed() };
    } finally {
      clearTimeout(deadline);
      cancel.removeEventListener('abort', onCancel);
    }
  }

  /** Closes the proxy's agent (its connections); the next probe builds a new one. */
  async release(key: string): Promise<void> {
    const entry = this.agents.get(key);
    if (!entry) return;
    this.agents.delete(key);
    await closeQuietly(entry.agent);
  }

  /** Drops `agent` — but never a newer agent built for the key meanwhile (endpoint changed). */
  private discard(key: string, agent: ProxyAgent): void {
    if (this.agents.get(key)?.agent === agent) this.agents.delete(key);
    void closeQuietly(agent);
  }

  async close(): Promise<void> {
    const all = [...this.agents.values()];
    this.agents.clear();
    await Promise.all(all.map((e) => closeQuietly(e.agent)));
  }

  private agentFor(target: ProbeTarget): ProxyAgent {
    const uri = proxyURI(target);
    const existing = this.agents.get(target.key);
    if (existing?.proxyURI === uri) return existing.agent;
    if (existing) void closeQuietly(existing.agent);
    const agent = new ProxyAgent({
      uri,
      // One probe at a time per proxy, so one connection is all it ever needs.
      connections: 1,
      connectTimeout: target.timeoutSeconds * 1000,
      requestTls: this.secureContext ? { secureContext: this.secureContext } : undefined,
    });
    this.agents.set(target.key, { proxyURI: uri, agent });
    return agent;
  }
}

async function closeQuietly(agent: ProxyAgent): Promise<void> {
  // destroy, not close: close would wait for an in-flight (possibly black-holed) request.
  await agent.destroy().catch(() => undefined);
}
