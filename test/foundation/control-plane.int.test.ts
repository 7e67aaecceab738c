import { eventually as pollUntil } from '../../framework/testing/index.js';
import { access, readdir, readFile } from 'node:fs/promises';
import { CoreV1Api } from '@kubernetes/client-node';
import { ControlPlane } from '../../framework/testing/control-plane.js';
import { CONTROL_PLANE_DIR_PREFIX } from '../harness/kube.js';

// This suite runs its own control plane, because it stops the API server: the shared one
// must stay up for every other suite.

/** PIDs of live processes whose command line mentions `text`; read from /proc, Linux only. */
async function processesMentioning(text: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.includes(text)) pids.push(Number(entry));
    } catch {
      /* the process exited while we looked */
    }
  }
  return pids;
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** Retries `probe` until it stops throwing (its last error fails the test). */
function eventually<T>(probe: () => Promise<T>, what: string, timeoutMs = 60_000): Promise<T> {
  return pollUntil(what, async () => ({ value: await probe() }), { timeoutMs, intervalMs: 250 }).then(
    (r) => r.value,
  );
}

describe('the control-plane harness', () => {
  let cp: ControlPlane;
  let core: CoreV1Api;

  beforeAll(async () => {
    cp = await ControlPlane.start({ dirPrefix: CONTROL_PLANE_DIR_PREFIX });
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
  }, 240_000); // a second control plane booting on a busy two-core machine
  afterAll(() => cp?.stop());

  it('runs etcd and kube-apiserver out of its own temporary folder', async () => {
    expect(await exists(cp.dir)).toBe(true);
    expect((await processesMentioning(cp.dir)).length).toBe(2);
  });

  it('survives a stop and restart of the API server, keeping the data in etcd', async () => {
    await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'survivor' }, data: { kept: 'yes' } },
    });

    await cp.stopApiServer();
    await expect(core.listNamespace()).rejects.toThrow();
    expect((await processesMentioning(cp.dir)).length).toBe(1); // etcd only

    await cp.startApiServer();
    // A fresh KubeConfig as well as the old client: the certificate and token are unchanged.
    const again = cp.kubeConfig().makeApiClient(CoreV1Api);
    const read = await eventually(
      () => again.readNamespacedConfigMap({ namespace: 'default', name: 'survivor' }),
      'reading the ConfigMap',
    );
    expect(read.data).toEqual({ kept: 'yes' });
    await expect(core.listNamespace()).resolves.toBeDefined();
  });

  it('stop() leaves no process and no temporary folder behind', async () => {
    const dir = cp.dir;
    await cp.stop();
    expect(await processesMentioning(dir)).toEqual([]);
    expect(await exists(dir)).toBe(false);
  });
});

describe('a control plane whose owner died', () => {
  it('is reaped by the next start: its processes killed and its folder removed', async () => {
    const { spawn } = await import('node:child_process');
    const { mkdtemp, writeFile, stat } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { reapAbandoned } = await import('../../framework/testing/control-plane.js');
    // A stand-in for an orphaned etcd, owned by a process that no longer exists.
    const orphan = spawn('sleep', ['300'], { stdio: 'ignore' });
    const gone = spawn('true');
    await new Promise((r) => gone.once('exit', r));
    const dir = await mkdtemp(join(tmpdir(), CONTROL_PLANE_DIR_PREFIX));
    await writeFile(join(dir, 'owner.pid'), String(gone.pid));
    await writeFile(join(dir, 'children.pids'), `${orphan.pid}\n`);
    const exited = new Promise((r) => orphan.once('exit', r));

    expect(await reapAbandoned(CONTROL_PLANE_DIR_PREFIX)).toBeGreaterThanOrEqual(1);
    await exited;
    await expect(stat(dir)).rejects.toThrow();
  });
});
