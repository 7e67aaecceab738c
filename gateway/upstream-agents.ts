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

  /**
   * Stops reusing the connections to an upstream that failed (a dead one would fail them all):
   * its idle ones close now, the next request opens a new one, and those carrying a response
   * (other clients' downloads through the same upstream) finish and then close. Agent.destroy()
   * would cut them too.
   */
  forget(upstream: Upstream): void {
    const key = keyOf(upstream);
    const agent = this.agents.get(key);
    if (agent === undefined) return;
    this.agents.delete(key);
    retire(agent);
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

/** An agent no request will be given again: idle sockets close, busy ones close once free. */
function retire(agent: Agent): void {
  agent.keepSocketAlive = () => false;
  for (const sockets of Object.values(agent.freeSockets))
    for (const socket of sockets ?? []) socket.destroy();
}

/** A guarded (External) upstream never shares pooled connections with an unguarded one. */
function keyOf(upstream: Upstream): string {
  return `${upstream.guarded === true ? 'guarded ' : ''}${upstream.host}:${upstream.port}`;
}
