import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { buildApp, type AppOptions } from '../../charts/app.js';

/** Just enough of a Kubernetes object for the tests to navigate it. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

/** Each chart's objects as synthesized now, in memory, by chart id. */
export function chartObjects(options: AppOptions = {}): Map<string, Manifest[]> {
  const app = buildApp('unused', options);
  return new Map(app.charts.map((c) => [c.node.id, c.toJson() as Manifest[]]));
}

/** The objects of one committed dist/ file, in file order: what `kubectl apply -f` sends. */
export async function distObjects(file: string): Promise<Manifest[]> {
  // cdk8s writes YAML 1.1; read it with the same rules, as kubectl does.
  const text = await readFile(new URL(`../../dist/${file}`, import.meta.url), 'utf8');
  return parseAllDocuments(text, { version: '1.1' })
    .map((d) => d.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
}

/** The one object of `kind` named `name`, or an error listing what is there. */
export function find(objects: readonly Manifest[], kind: string, name: string, namespace?: string): Manifest {
  const found = objects.find(
    (o) =>
      o.kind === kind &&
      o.metadata.name === name &&
      (namespace === undefined || o.metadata.namespace === namespace),
  );
  if (!found) {
    const have = objects.map((o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`).join(', ');
    throw new Error(`no ${kind} ${namespace ?? ''}/${name}; have: ${have}`);
  }
  return found;
}
