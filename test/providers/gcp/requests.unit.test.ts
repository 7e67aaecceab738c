import type { CreateRequest } from '../../../providers/contract.js';
import { GCP_DEFAULTS, type GcpSettings } from '../../../providers/gcp/config.js';
import { gcpState, toInstance } from '../../../providers/gcp/instance-view.js';
import {
  ownedFilter,
  buildInsert,
  formatProviderID,
  missingPlacement,
  parseProviderID,
} from '../../../providers/gcp/requests.js';
import { instanceName } from '../../../providers/naming.js';

const UID = '0b5a3c1e-8d2f-4c6a-9e7b-1f2d3c4b5a69';
const settings: GcpSettings = { ...GCP_DEFAULTS, networkTags: ['proxy', 'squid'], project: 'crawl-prod' };
const request: CreateRequest = {
  uid: UID,
  proxy: 'fleet/eu-1',
  namespace: 'fleet',
  owner: 'test-owner',
  port: 3128,
  cloudInit: '#cloud-config\npackages: [squid]\n',
  placement: {
    zone: 'europe-west1-b',
    machineType: 'e2-small',
    image: 'projects/debian-cloud/global/images/family/debian-12',
  },
};

describe('the GCP insert request', () => {
  it('is built exactly: name, machine type URL, boot disk, NAT access config, tags, GC labels, user-data', () => {
    const name = instanceName(UID);
    expect(buildInsert(request, settings)).toEqual({
      ref: { project: 'crawl-prod', zone: 'europe-west1-b', instance: name },
      instanceResource: {
        name,
        description: 'proxy-operator Proxy fleet/eu-1',
        machineType: 'zones/europe-west1-b/machineTypes/e2-small',
        disks: [
          {
            boot: true,
            autoDelete: true,
            initializeParams: { sourceImage: 'projects/debian-cloud/global/images/family/debian-12' },
          },
        ],
        networkInterfaces: [
          {
            network: 'global/networks/default',
            accessConfigs: [{ type: 'ONE_TO_ONE_NAT', name: 'External NAT' }],
          },
        ],
        tags: { items: ['proxy', 'squid'] },
        labels: {
          'proxy-operator-uid': UID,
          'proxy-operator-managed': 'true',
          'proxy-operator-owner': 'test-owner',
          'proxy-operator-namespace': 'fleet',
        },
        metadata: { items: [{ key: 'user-data', value: '#cloud-config\npackages: [squid]\n' }] },
      },
    });
  });

  it.each([
    ['default', 'global/networks/default'],
    ['egress', 'global/networks/egress'],
    ['projects/host/global/networks/shared', 'projects/host/global/networks/shared'],
  ])('uses network %s as %s', (network, url) => {
    expect(
      buildInsert(request, { ...settings, network }).instanceResource.networkInterfaces![0].network,
    ).toBe(url);
  });

  it('sends no metadata items without cloud-init', () => {
    expect(buildInsert({ ...request, cloudInit: undefined }, settings).instanceResource.metadata).toEqual({
      items: [],
    });
  });

  it.each([
    [{ zone: undefined }, 'placement.zone'],
    [{ zone: '' }, 'placement.zone'],
    [{ machineType: undefined }, 'placement.machineType'],
    [{ image: '  ' }, 'placement.image'],
    [{ zone: undefined, image: undefined }, 'placement.zone'],
    [{}, undefined],
  ])('with placement overrides %p is missing %p', (override, missing) => {
    expect(missingPlacement({ ...request, placement: { ...request.placement, ...override } })).toBe(missing);
  });

  it('lists by the managed and owner labels in AIP-160 syntax', () => {
    expect(ownedFilter('prod')).toBe(
      'labels.proxy-operator-managed = "true" AND labels.proxy-operator-owner = "prod"',
    );
  });
});

describe('the GCP providerID', () => {
  it('is project/zone/instance and round-trips', () => {
    const ref = { project: 'p', zone: 'us-east1-c', instance: 'proxy-abc' };
    expect(formatProviderID(ref)).toBe('p/us-east1-c/proxy-abc');
    expect(parseProviderID('p/us-east1-c/proxy-abc')).toEqual(ref);
  });

  it.each(['', 'proxy-abc', 'p/zone', 'p//proxy', 'a/b/c/d'])('rejects %p', (id) => {
    expect(parseProviderID(id)).toBeUndefined();
  });
});

describe('a GCP instance as seen by the operator', () => {
  it.each([
    ['PROVISIONING', 'Provisioning'],
    ['STAGING', 'Provisioning'],
    ['REPAIRING', 'Provisioning'],
    ['RUNNING', 'Running'],
    ['STOPPING', 'Stopped'],
    ['STOPPED', 'Stopped'],
    ['SUSPENDING', 'Stopped'],
    ['SUSPENDED', 'Stopped'],
    ['TERMINATED', 'Stopped'],
    ['SOMETHING_NEW', 'Provisioning'],
    [undefined, 'Provisioning'],
  ])('status %p is state %s', (status, state) => {
    expect(gcpState(status)).toBe(state);
  });

  it('takes its ID from project, zone URL and name, its IP from the NAT, its UID from the label', () => {
    expect(
      toInstance(
        {
          name: 'proxy-abc',
          zone: 'https://www.googleapis.com/compute/v1/projects/p/zones/europe-west1-b',
          status: 'RUNNING',
          creationTimestamp: '2026-03-01T10:00:00.000-08:00',
          labels: { 'proxy-operator-uid': UID, 'proxy-operator-managed': 'true' },
          networkInterfaces: [{ networkIP: '10.0.0.2', accessConfigs: [{ natIP: '34.1.2.3' }] }],
        },
        'p',
      ),
    ).toEqual({
      id: 'p/europe-west1-b/proxy-abc',
      ip: '34.1.2.3',
      state: 'Running',
      uid: UID,
      // Made before the owner label existed: no owner, so no operator's sweep lists it.
      owner: '',
      namespace: '',
      revision: '',
      createdAt: new Date('2026-03-01T18:00:00.000Z'),
    });
  });

  it('has no IP until the NAT address is assigned', () => {
    expect(toInstance({ name: 'n', zone: 'z', status: 'STAGING', networkInterfaces: [{}] }, 'p').ip).toBe('');
  });
});
