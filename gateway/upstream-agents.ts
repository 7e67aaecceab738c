// One keep-alive http.Agent per upstream proxy address: plain-HTTP requests through the same
// upstream reuse its connections (the largest single factor in a forward proxy's cost).
import { Agent } from 'node:http';
import type { Upstream } from './ports.js';

export class UpstreamAgents {
  private readonly agents = new Map<string, Agent>();

  constructor(private readonly maxFreeSockets = 64) {}

  for(upstream: Upstream): Agent {
    const key = keyOf(upstream);
    let agent = this.agents.get(key);
    if (agent === undefined) {
      agent = new Agent({ keepAlive: true, maxFreeSockets: this.maxFreeSockets, scheduling: 'lifo' });
      this.agents.set(key, agent);
    }
    return agent;
  }

  /** Drops the pooled connections to an upstream that failed (a dead one would fail them all). */
  forget(upstream: Upstream): void {
    const key = keyOf(upstream);
    this.agents.get(key)?.destroy();
    this.agents.delete(key);
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

/** A guarded (External) upstream never shares pooled connections with an unguarded one. */
function keyOf(upstream: Upstream): string {
  return `${upstream.guarded === true ? 'guarded ' : ''}${upstream.host}:${upstream.port}`;
}
