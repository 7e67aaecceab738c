import type { KubeConfig } from '@kubernetes/client-node';
import { KubeClient, isStatus } from '../../framework/utils/kube-client.js';
import type { Manifest } from './manifests.js';

interface ApiResourceList {
  resources: { name: string; kind: string; namespaced: boolean }[];
}

export interface ApplyOptions {
  /** dryRun=All: the server validates, defaults and admits the object but stores nothing. */
  dryRun?: boolean;
  /** For namespaced objects that name none, as `kubectl apply -n` does. */
  namespace?: string;
}

/**
 * Server-side apply of plain manifests through raw requests. Typed clients would run the
 * objects through their models, which drop fields they do not know (a CRD's `default` and
 * `x-kubernetes-validations`, or a typo): here the server sees exactly the YAML, and strict
 * field validation turns an unknown or duplicate field into an error.
 */
export class ServerSideApply {
  private readonly client: KubeClient;
  private readonly discovered = new Map<string, Promise<ApiResourceList>>();

  constructor(
    kubeConfig: KubeConfig,
    private readonly fieldManager: string,
  ) {
    this.client = new KubeClient(kubeConfig);
  }

  async apply(object: Manifest, options: ApplyOptions = {}): Promise<Manifest> {
    const path = await this.path(object, options.namespace);
    return this.client.request<Manifest>('PATCH', path, {
      query: {
        fieldManager: this.fieldManager,
        fieldValidation: 'Strict',
        force: true,
        dryRun: options.dryRun ? 'All' : undefined,
      },
      // JSON is YAML, so the apply-patch content type takes it as is.
      body: object,
      contentType: 'application/apply-patch+yaml',
    });
  }

  /** The object's REST path, from the API server's discovery documents. */
  private async path(object: Manifest, defaultNamespace?: string): Promise<string> {
    const { apiVersion, kind, metadata } = object;
    const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    const list = await this.resources(base);
    const resource = list.resources.find((r) => r.kind === kind && !r.name.includes('/'));
    if (!resource) throw new Error(`the API server serves no kind ${kind} in ${apiVersion}`);
    if (!resource.namespaced) return `${base}/${resource.name}/${metadata.name}`;
    const namespace = metadata.namespace ?? defaultNamespace;
    if (!namespace) throw new Error(`${kind} ${metadata.name} is namespaced but names no namespace`);
    return `${base}/namespaces/${namespace}/${resource.name}/${metadata.name}`;
  }

  private resources(base: string): Promise<ApiResourceList> {
    let list = this.discovered.get(base);
    if (!list) {
      list = this.discover(base);
      this.discovered.set(base, list);
      list.catch(() => this.discovered.delete(base));
    }
    return list;
  }

  /** A just-established CRD can take a moment to appear in discovery: 404s are retried. */
  private async discover(base: string, timeoutMs = 30_000): Promise<ApiResourceList> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        return await this.client.request<ApiResourceList>('GET', base);
      } catch (err) {
        if (!isStatus(err, 404) || Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }
}
