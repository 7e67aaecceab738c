import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { KubeClient } from '../utils/kube-client.js';
import { errorMessage } from '../utils/logger.js';
import type { EventRecorder, KubeObject } from './types.js';

/**
 * Posts core/v1 Events about one object. Events are best effort: a failure to post one is
 * logged, never allowed to fail the handler that reported it.
 */
export class ObjectEventRecorder implements EventRecorder {
  constructor(
    private readonly client: KubeClient,
    private readonly object: KubeObject,
    private readonly component: string,
    private readonly logger: Logger,
    private readonly signal?: AbortSignal,
  ) {}

  normal(reason: string, message: string): Promise<void> {
    return this.post('Normal', reason, message);
  }

  warning(reason: string, message: string): Promise<void> {
    return this.post('Warning', reason, message);
  }

  private async post(type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const { metadata, apiVersion, kind } = this.object;
    const namespace = metadata.namespace ?? 'default';
    const now = new Date().toISOString();
    try {
      await this.client.request('POST', `/api/v1/namespaces/${namespace}/events`, {
        body: {
          metadata: { name: `${metadata.name}.${randomBytes(8).toString('hex')}`, namespace },
          involvedObject: {
            apiVersion,
            kind,
            name: metadata.name,
            namespace: metadata.namespace,
            uid: metadata.uid,
            resourceVersion: metadata.resourceVersion,
          },
          type,
          reason,
          // The API rejects messages over 1 KiB.
          message: message.slice(0, 1000),
          source: { component: this.component },
          reportingComponent: this.component,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
        signal: AbortSignal.any([...(this.signal ? [this.signal] : []), AbortSignal.timeout(30_000)]),
      });
    } catch (err) {
      this.logger.warn({ err: errorMessage(err), reason }, 'could not post event');
    }
  }
}
