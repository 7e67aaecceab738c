// `npm run control-plane:setup`; the Node.js check first (see cmd/operator.ts).
import { exitOnOldNode } from './node-version.js';

exitOnOldNode('control-plane:setup');
await import('./control-plane-setup-main.js');
