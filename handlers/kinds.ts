import type { KindRef } from '../framework/index.js';
import { CLOUD_INIT_SECRET_LABEL, GROUP, KIND, PLURAL, VERSION } from '../crds/proxy-types.js';

export const PROXY_KIND: KindRef = {
  group: GROUP,
  version: VERSION,
  plural: PLURAL,
  kind: KIND,
  namespaced: true,
};
export const SECRET_KIND: KindRef = {
  group: '',
  version: 'v1',
  plural: 'secrets',
  kind: 'Secret',
  namespaced: true,
};
/** The cache view of cloud-init Secrets (only labelled ones are watched). */
export const CLOUD_INIT_SECRETS: KindRef = {
  ...SECRET_KIND,
  labelSelector: `${CLOUD_INIT_SECRET_LABEL}=true`,
};
