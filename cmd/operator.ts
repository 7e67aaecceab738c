// `npm start` and the image's entry point. Only the Node.js check is imported statically:
// on an older Node the operator's own modules fail while linking, before any code runs.
import { exitOnOldNode } from './node-version.js';

exitOnOldNode('proxy-operator');
await import('./operator-main.js');
