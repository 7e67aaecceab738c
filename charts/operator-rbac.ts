import * as kplus from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { OPERATOR_NAME, OPERATOR_NAMESPACE, PROXIES_NAMESPACE } from './names.js';
import { OPERATOR_PERMISSIONS, type Permission, type PermissionScope } from './operator-permissions.js';

export interface OperatorRbacProps {
  serviceAccount: kplus.IServiceAccount;
  permissions?: readonly Permission[];
}

/**
 * One ClusterRole for what spans namespaces and one Role per namespace-bound scope, each
 * bound to the operator's ServiceAccount. Rules come from the permission table only.
 */
export class OperatorRbac extends Construct {
  constructor(scope: Construct, id: string, props: OperatorRbacProps) {
    super(scope, id);
    const permissions = props.permissions ?? OPERATOR_PERMISSIONS;
    const of = (s: PermissionScope) => permissions.filter((p) => p.scope === s);

    const clusterRole = new kplus.ClusterRole(this, 'cluster-role', {
      metadata: { name: OPERATOR_NAME },
    });
    for (const p of of('cluster')) clusterRole.allow([...p.verbs], resourceOf(p));
    new kplus.ClusterRoleBinding(this, 'cluster-role-binding', {
      metadata: { name: OPERATOR_NAME },
      role: clusterRole,
    }).addSubjects(props.serviceAccount);

    this.namespacedRole('operator-namespace', OPERATOR_NAMESPACE, of('operator-namespace'), props);
    this.namespacedRole('proxies-namespace', PROXIES_NAMESPACE, of('proxies-namespace'), props);
  }

  private namespacedRole(id: string, namespace: string, rules: Permission[], props: OperatorRbacProps): void {
    if (rules.length === 0) return;
    const metadata = { name: OPERATOR_NAME, namespace };
    const role = new kplus.Role(this, `${id}-role`, { metadata });
    for (const p of rules) role.allow([...p.verbs], resourceOf(p));
    new kplus.RoleBinding(this, `${id}-role-binding`, { metadata, role }).addSubjects(props.serviceAccount);
  }
}

function resourceOf(p: Permission): kplus.IApiResource & kplus.IApiEndpoint {
  const resource = kplus.ApiResource.custom({ apiGroup: p.apiGroup, resourceType: p.resource });
  if (p.resourceName === undefined) return resource;
  const named = { apiGroup: p.apiGroup, resourceType: p.resource, resourceName: p.resourceName };
  return { ...named, asApiResource: () => named, asNonApiResource: () => undefined };
}
