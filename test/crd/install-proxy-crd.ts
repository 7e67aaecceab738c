import { readFile } from 'node:fs/promises';
import {
  ApiextensionsV1Api,
  setHeaderOptions,
  PatchStrategy,
  type KubeConfig,
} from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import type { CustomResourceDefinition } from '../../crds/openapi-schema.js';
import { PROXY_CRD_NAME } from '../../crds/proxy-crd.js';

const DIST_CRDS = new URL('../../dist/crds.yaml', import.meta.url);

/** The Proxy CRD exactly as committed in dist/: the tests exercise what GitOps deploys. */
export async function readDistProxyCrd(): Promise<CustomResourceDefinition> {
  // cdk8s writes YAML 1.1; read it with the same rules, as kubectl does.
  const docs = parseAllDocuments(await readFile(DIST_CRDS, 'utf8'), { version: '1.1' });
  const crds = (Array.isArray(docs) ? docs : [docs]).map((d) => d.toJS() as CustomResourceDefinition);
  const crd = crds.find((c) => c.kind === 'CustomResourceDefinition' && c.metadata.name === PROXY_CRD_NAME);
  if (!crd)
    throw new Error(
      `dist/crds.yaml holds no CustomResourceDefinition ${PROXY_CRD_NAME}: run \`npm run synth\``,
    );
  return crd;
}

/**
 * Applies the CRD from dist/ (or a variant of it; server-side apply, so suites sharing one control plane can all
 * call it) and waits until the API server serves the Proxy resource.
 */
export async function installProxyCrd(
  kc: KubeConfig,
  timeoutMs = 60_000,
  crd?: CustomResourceDefinition,
): Promise<void> {
  crd ??= await readDistProxyCrd();
  const api = kc.makeApiClient(ApiextensionsV1Api);
  // The generated patch method sends the body untyped. KubernetesObjectApi would instead run it
  // through the V1CustomResourceDefinition model, which silently drops `default` and
  // `x-kubernetes-validations` from a plain manifest (the model spells them differently).
  await api.patchCustomResourceDefinition(
    { name: PROXY_CRD_NAME, body: crd, fieldManager: 'proxy-operator-tests', force: true },
    setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
  );
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const current = await api.readCustomResourceDefinition({ name: PROXY_CRD_NAME });
    const established = current.status?.conditions?.some(
      (c) => c.type === 'Established' && c.status === 'True',
    );
    if (established) return;
    if (Date.now() > deadline) {
      throw new Error(
        `${PROXY_CRD_NAME} not Established after ${timeoutMs} ms: ${JSON.stringify(current.status)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
