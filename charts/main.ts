import { buildApp } from './app.js';

// `npm run synth`: writes one YAML file per chart into dist/ (or the folder given as argument).
// npm runs scripts from the package root, so the relative default lands in the repository's dist/.
buildApp(process.argv[2] ?? 'dist').synth();
