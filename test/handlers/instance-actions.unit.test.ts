import { CLOUD_INIT_PLACEHOLDERS } from '../../crds/proxy-credentials.js';
import type { CreateRequest } from '../../providers/contract.js';
import { createRequest, type InstanceMaterial } from '../../handlers/instance-actions.js';
import { stateMachineProxy } from './state-machine-proxy.js';

const CREDS = { username: 'proxy-abc', password: 's3cret' };
const TEXT = `#cloud-config\n# ${CLOUD_INIT_PLACEHOLDERS.username}:${CLOUD_INIT_PLACEHOLDERS.password}\n`;
const BASE = {
  uid: 'u-1',
  proxy: 'ns/p',
  namespace: 'ns',
  owner: 'owner-1',
  port: 3128,
  placement: {},
};

describe("createRequest: the provider's request for a Managed proxy's new instance", () => {
  it.each<[string, InstanceMaterial, CreateRequest]>([
    [
      'cloud-init gets the credentials filled in; the credentials go along',
      { cloudInit: TEXT, credentials: CREDS, revision: 'h-1' },
      { ...BASE, revision: 'h-1', cloudInit: '#cloud-config\n# proxy-abc:s3cret\n', credentials: CREDS },
    ],
    [
      'no cloud-init: none sent',
      { cloudInit: undefined, credentials: CREDS, revision: 'h-1' },
      { ...BASE, revision: 'h-1', cloudInit: undefined, credentials: CREDS },
    ],
    [
      'no credentials: the placeholders are emptied, no credentials key',
      { cloudInit: TEXT, credentials: undefined, revision: undefined },
      { ...BASE, revision: undefined, cloudInit: '#cloud-config\n# :\n' },
    ],
  ])('%s', (_what, made, want) => {
    expect(createRequest(stateMachineProxy({ status: { phase: 'Pending' } }), 'owner-1', made)).toEqual(want);
  });

  it("the placement and port are the spec's", () => {
    const proxy = stateMachineProxy({
      spec: { port: 8080, placement: { zone: 'europe-west1-b', machineType: 'e2-micro' } },
      status: { phase: 'Pending' },
    });
    expect(
      createRequest(proxy, 'owner-1', { cloudInit: undefined, credentials: undefined, revision: 'h' }),
    ).toMatchObject({ port: 8080, placement: { zone: 'europe-west1-b', machineType: 'e2-micro' } });
  });
});
