import type { V1ClusterRole, V1RoleBinding } from '@kubernetes/client-node';
import { OPERATOR_NAMESPACE, SERVICE_ACCOUNT_NAME } from '../../charts/names.js';
import { chartObjects } from './manifests.js';

const operator = chartObjects().get('operator')!;
const roles = operator.filter(
  (o) => o.kind === 'Role' || o.kind === 'ClusterRole',
) as unknown as V1ClusterRole[];
const bindings = operator.filter(
  (o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding',
) as unknown as (V1RoleBinding & { kind: string })[];

describe('the operator RBAC manifests', () => {
  it.each(['apiGroups', 'resources', 'verbs', 'resourceNames'] as const)(
    'grant no wildcard in %s',
    (field) => {
      for (const rule of roles.flatMap((r) => r.rules ?? [])) expect(rule[field] ?? []).not.toContain('*');
    },
  );

  it('grant nothing but API resources (no nonResourceURLs)', () => {
    for (const rule of roles.flatMap((r) => r.rules ?? [])) expect(rule.nonResourceURLs).toBeUndefined();
  });

  it('bind every role to the operator ServiceAccount only', () => {
    expect(bindings.length).toBe(roles.length);
    for (const b of bindings) {
      expect(b.subjects).toEqual([
        expect.objectContaining({
          kind: 'ServiceAccount',
          name: SERVICE_ACCOUNT_NAME,
          namespace: OPERATOR_NAMESPACE,
        }),
      ]);
    }
  });

  it('bind roles that the chart defines, in the same namespace', () => {
    for (const b of bindings) {
      const role = roles.find(
        (r) =>
          r.kind === b.roleRef.kind &&
          r.metadata!.name === b.roleRef.name &&
          r.metadata!.namespace === b.metadata!.namespace,
      );
      expect([b.kind, b.metadata!.namespace, role === undefined]).toEqual([
        b.kind,
        b.metadata!.namespace,
        false,
      ]);
    }
  });
});
