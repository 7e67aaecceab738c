// `npm run demo`; the Node.js check first (see cmd/operator.ts).
import { exitOnOldNode } from './node-version.js';

exitOnOldNode('demo');
await import('./demo/main.js');
