import * as kplus from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { OPERATOR_NAMESPACE } from './names.js';
import {
  permissionsOf,
  type Component,
  type Permission,
  type PermissionScope,
} from './operator-permissions.js';

export interface OperatorRbacProps {
  serviceAccount: kplus.IServiceAccount;
  /** The name of every Role, RoleBinding, ClusterRole and ClusterRoleBinding: the account's name. */
  name: string;
  /** The components the account runs: its rules are their rows of the permission table. */
  components: readonly Component[];
  /** --watch-namespace: the Proxies, their Secrets and Events. */
  watchNamespace: string;
  /** The namespaces of the kubernetes provider's Pods (from the providers config). */
  proxiesNamespaces: readonly string[];
}

/**
 * One Role (and RoleBinding) per namespace the account's rows name, and a ClusterRole only
 * for what spans namespaces, all bound to the one ServiceAccount. Rules come from the
 * permission table only.
 */
export class OperatorRbac extends Construct {
  constructor(scope: Construct, id: string, props: OperatorRbacProps) {
    super(scope, id);
    const permissions = permissionsOf(props.components);
    const namespacesOf: Record<Exclude<PermissionScope, 'cluster'>, readonly string[]> = {
      'watched-namespace': [props.watchNamespace],
      'operator-namespace': [OPERATOR_NAMESPACE],
      'proxies-namespace': props.proxiesNamespaces,
    };
    const byNamespace = new Map<string, Permission[]>();
    const cluster: Permission[] = [];
    for (const p of permissions) {
      if (p.scope === 'cluster') {
        cluster.push(p);
        continue;
      }
      for (const ns of namespacesOf[p.scope]) byNamespace.set(ns, [...(byNamespace.get(ns) ?? []), p]);
    }

    if (cluster.length > 0) {
      const clusterRole = new kplus.ClusterRole(this, 'cluster-role', { metadata: { name: props.name } });
      for (const p of cluster) clusterRole.allow([...p.verbs], resourceOf(p));
      new kplus.ClusterRoleBinding(this, 'cluster-role-binding', {
        metadata: { name: props.name },
        role: clusterRole,
      }).addSubjects(props.serviceAccount);
    }
    for (const [namespace, rules] of byNamespace) {
      const metadata = { name: props.name, namespace };
      const role = new kplus.Role(this, `role-${namespace}`, { metadata });
      for (const p of rules) role.allow([...p.verbs], resourceOf(p));
      new kplus.RoleBinding(this, `role-binding-${namespace}`, { metadata, role }).addSubjects(
        props.serviceAccount,
      );
    }
  }
}

function resourceOf(p: Permission): kplus.IApiResource & kplus.IApiEndpoint {
  const resource = kplus.ApiResource.custom({ apiGroup: p.apiGroup, resourceType: p.resource });
  if (p.resourceName === undefined) return resource;
  const named = { apiGroup: p.apiGroup, resourceType: p.resource, resourceName: p.resourceName };
  return { ...named, asApiResource: () => named, asNonApiResource: () => undefined };
}
