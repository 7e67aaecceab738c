import { ClusterNameError, resolveClusterName } from '../../cmd/cluster-name.js';

describe('the owner identity (--cluster-name)', () => {
  it('is the flag when given, without reading the cluster', async () => {
    let reads = 0;
    expect(await resolveClusterName('prod', async () => (reads++, 'uid'))).toBe('prod');
    expect(reads).toBe(0);
  });

  it("defaults to the kube-system Namespace's UID", async () => {
    expect(await resolveClusterName(undefined, async () => '3f0c1a9e-7d2b-4c55-9a61-0e8d2f4b7c10')).toBe(
      '3f0c1a9e-7d2b-4c55-9a61-0e8d2f4b7c10',
    );
  });

  it.each([
    ['cannot be read', async () => Promise.reject(new Error('HTTP-Code: 403')), /403.*set --cluster-name/],
    ['has no UID', async () => undefined, /no UID.*set --cluster-name/],
  ])('stops start-up naming the flag when the Namespace %s', async (_what, read, message) => {
    const failed = resolveClusterName(undefined, read);
    await expect(failed).rejects.toThrow(ClusterNameError);
    await expect(failed).rejects.toThrow(message);
  });
});
