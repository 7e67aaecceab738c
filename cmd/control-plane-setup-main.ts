import { ensureBinaries } from '../framework/control-plane/index.js';

// `npm run control-plane:setup`: obtain the control-plane binaries and say where they are.
const bins = await ensureBinaries((m) => process.stderr.write(`[control-plane] ${m}\n`));
process.stdout.write(
  `kube-apiserver: ${bins.kubeApiserver}\netcd: ${bins.etcd}\nkubectl: ${bins.kubectl ?? '(not available)'}\nsource: ${bins.source}\nexport KUBEBUILDER_ASSETS=${bins.dir}\n`,
);
