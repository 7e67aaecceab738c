// What `npm run demo -- <args>` asks for. A pure function so the help and the mistakes are a
// table test, not a second demo started by accident.

export const DEMO_USAGE = [
  'Usage: npm run demo [-- <flags>]',
  '',
  'The whole product on this machine, no cluster and no cloud: a local control plane, the',
  'operator with the mock provider, two proxies, the discovery API on 127.0.0.1:8090 and a demo',
  'site on 127.0.0.1:8091 (the next free ports when those are taken, said on stderr).',
  '',
  '  --no-wait   run the walkthrough and exit (tests and CI use it)',
  '  --help, -h  print this help',
  '',
  'LOG_LEVEL (env) sets the operator log level on stderr (default warn).',
].join('\n');

export type DemoArgs = { kind: 'help' } | { kind: 'run'; wait: boolean } | { kind: 'error'; message: string };

export function demoArgs(argv: readonly string[]): DemoArgs {
  let wait = true;
  for (const arg of argv) {
    if (arg === '--help' || arg === '-h') return { kind: 'help' };
    if (arg === '--no-wait') wait = false;
    else return { kind: 'error', message: `unknown argument "${arg}"` };
  }
  return { kind: 'run', wait };
}
