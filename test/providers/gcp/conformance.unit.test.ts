import { pino } from 'pino';
import { describeProviderConformance } from '../../../providers/conformance/index.js';
import { LABEL_MANAGED, LABEL_UID } from '../../../providers/contract.js';
import { GCP_DEFAULTS } from '../../../providers/gcp/config.js';
import { GcpProvider } from '../../../providers/gcp/gcp-provider.js';
import { closedPort, startBlackHole, type BlackHole } from '../dead-ends.js';
import { FakeCompute } from './fake-compute.js';
import { loopbackComputeApi } from './loopback-compute.js';

const logger = pino({ level: 'silent' });
const settings = { ...GCP_DEFAULTS, networkTags: ['proxy'], project: 'conformance-project' };
const compute = new FakeCompute();
// GCP's order: a deleted VM is STOPPING for a while (a second delete would be refused), then gone.
compute.deleteMillis = 300;
let blackHole: BlackHole | undefined;
const clients: Array<{ close(): Promise<void> }> = [];

/** A VM put into the project by someone else, as Compute would list it. */
function foreignVm(name: string, labels: Record<string, string>) {
  compute.vms.set(name, {
    name,
    zone: 'projects/conformance-project/zones/europe-west1-b',
    status: 'RUNNING',
    labels,
    creationTimestamp: new Date().toISOString(),
  });
}

// The provider over the fake Compute API (GCP has no emulator); the unresponsive and failing
// backends are the real @google-cloud/compute client pointed at a loopback black hole and at
// a closed port, so cancellation and network errors go through the library itself.
describeProviderConformance({
  name: 'gcp',
  provider: () => new GcpProvider('gcp', settings, logger, compute),
  placement: {
    zone: 'europe-west1-b',
    machineType: 'e2-small',
    image: 'projects/debian-cloud/global/images/family/debian-12',
  },
  unknownID: 'conformance-project/europe-west1-b/proxy-000000000000',
  unresponsive: async () => {
    blackHole = await startBlackHole();
    const api = loopbackComputeApi(blackHole.port);
    clients.push(api);
    return new GcpProvider('gcp', settings, logger, api);
  },
  failing: async () => {
    // A short deadline: google-gax retries idempotent calls on UNAVAILABLE until it passes.
    const api = loopbackComputeApi(await closedPort(), 500);
    clients.push(api);
    return new GcpProvider('gcp', settings, logger, api);
  },
  seedForeign: async (owner) => {
    foreignVm(`foreign-${owner}`, { team: 'not-ours' });
    foreignVm(`unowned-${owner}`, { [LABEL_MANAGED]: 'true', [LABEL_UID]: 'from-before-owners' });
  },
  provisionsVisibly: true,
  teardown: async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await blackHole?.close();
  },
});
