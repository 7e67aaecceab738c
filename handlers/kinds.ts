import type { KindRef } from '../framework/index.js';
import { GROUP, KIND, PLURAL, VERSION } from '../crds/proxy-types.js';

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
