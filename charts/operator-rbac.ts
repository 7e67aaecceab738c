import { ApiObject, JsonPatch } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { APP_LABELS, OPERATOR_NAME, OPERATOR_NAMESPACE, PROXIES_NAMESPACE } from './names.js';
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
      metadata: { name: OPERATOR_NAME, labels: APP_LABELS },
    });
    for (const p of of('cluster')) clusterRole.allow([...p.verbs], resourceOf(p));
    new kplus.ClusterRoleBinding(this, 'cluster-role-binding', {
      metadata: { name: OPERATOR_NAME, labels: APP_LABELS },
      role: clusterRole,
    }).addSubjects(props.serviceAccount);

    this.namespacedRole('operator-namespace', OPERATOR_NAMESPACE, of('operator-namespace'), props);
    this.namespacedRole('proxies-namespace', PROXIES_NAMESPACE, of('proxies-namespace'), props);
  }

  private namespacedRole(id: string, namespace: string, rules: Permission[], props: OperatorRbacProps): void {
    if (rules.length === 0) return;
    const metadata = { name: OPERATOR_NAME, namespace, labels: APP_LABELS };
    const role = new kplus.Role(this, `${id}-role`, { metadata });
    for (const p of rules) role.allow([...p.verbs], resourceOf(p));
    const binding = new kplus.RoleBinding(this, `${id}-role-binding`, { metadata, role });
    binding.addSubjects(props.serviceAccount);
    // cdk8s-plus leaves the subject's namespace out when it equals the binding's; a binding in
    // another namespace would then name a ServiceAccount that does not exist there.
    ApiObject.of(binding).addJsonPatch(JsonPatch.add('/subjects/0/namespace', OPERATOR_NAMESPACE));
  }
}

function resourceOf(p: Permission): kplus.ApiResource {
  return kplus.ApiResource.custom({ apiGroup: p.apiGroup, resourceType: p.resource });
}
