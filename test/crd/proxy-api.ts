import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import {
  API_VERSION,
  GROUP,
  KIND,
  PLURAL,
  VERSION,
  type Proxy,
  type ProxyStatus,
} from '../../crds/proxy-types.js';

/** What a test writes: any JSON, so invalid manifests can be expressed too. */
export type ProxyManifest = { spec?: unknown; status?: unknown; metadata?: Record<string, unknown> };

/** Proxy CRUD in one namespace, through the generic custom-objects API as a GitOps tool would. */
export class ProxyApi {
  private readonly api: CustomObjectsApi;

  constructor(
    kc: KubeConfig,
    readonly namespace: string,
  ) {
    this.api = kc.makeApiClient(CustomObjectsApi);
  }

  private get where() {
    return { group: GROUP, version: VERSION, namespace: this.namespace, plural: PLURAL };
  }

  create(name: string, manifest: ProxyManifest, options: { dryRun?: boolean } = {}): Promise<Proxy> {
    const body = {
      apiVersion: API_VERSION,
      kind: KIND,
      ...manifest,
      metadata: { ...manifest.metadata, name },
    };
    return this.api.createNamespacedCustomObject({
      ...this.where,
      body,
      dryRun: options.dryRun ? 'All' : undefined,
    }) as Promise<Proxy>;
  }

  get(name: string): Promise<Proxy> {
    return this.api.getNamespacedCustomObject({ ...this.where, name }) as Promise<Proxy>;
  }

  replace(proxy: Proxy): Promise<Proxy> {
    return this.api.replaceNamespacedCustomObject({
      ...this.where,
      name: proxy.metadata.name,
      body: proxy,
    }) as Promise<Proxy>;
  }

  replaceStatus(proxy: Proxy): Promise<Proxy> {
    return this.api.replaceNamespacedCustomObjectStatus({
      ...this.where,
      name: proxy.metadata.name,
      body: proxy,
    }) as Promise<Proxy>;
  }

  patchSpec(name: string, spec: Record<string, unknown>): Promise<Proxy> {
    return this.api.patchNamespacedCustomObject(
      { ...this.where, name, body: { spec } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ) as Promise<Proxy>;
  }

  patchStatus(name: string, status: ProxyStatus | Record<string, unknown>): Promise<Proxy> {
    return this.api.patchNamespacedCustomObjectStatus(
      { ...this.where, name, body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ) as Promise<Proxy>;
  }

  /** Every Proxy in the namespace, in one list call. */
  async list(): Promise<Proxy[]> {
    return ((await this.api.listNamespacedCustomObject(this.where)) as { items: Proxy[] }).items;
  }

  /** The server-side table `kubectl get px` prints. */
  table(): Promise<ServerTable> {
    return this.api.listNamespacedCustomObject(
      this.where,
      setHeaderOptions('Accept', 'application/json;as=Table;v=v1;g=meta.k8s.io'),
    ) as Promise<ServerTable>;
  }
}

export interface ServerTable {
  kind: string;
  columnDefinitions: { name: string; type: string }[];
  rows: { cells: unknown[] }[];
}
