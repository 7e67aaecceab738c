import type { KindRef } from '../framework/index.js';

/** DI token for the ProxyTrigger. */
export const PROXY_TRIGGER = Symbol('ProxyTrigger');

/**
 * Lets a handler put an object back on the work queue (a timer that found work to do).
 * Bound to the Operator after it is built: the Operator resolves the handlers, so it cannot
 * be their constructor argument.
 */
export class ProxyTrigger {
  private target: { trigger(kind: KindRef, namespace: string | undefined, name: string): void } | undefined;

  bind(target: { trigger(kind: KindRef, namespace: string | undefined, name: string): void }): void {
    this.target = target;
  }

  fire(kind: KindRef, namespace: string | undefined, name: string): void {
    this.target?.trigger(kind, namespace, name);
  }
}
