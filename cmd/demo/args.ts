// What `npm run demo -- <args>` asks for. A pure function so the help and the mistakes are a
// table test, not a second demo started by accident.

export const DEFAULT_MANAGED_PROXIES = 1;
export const MAX_MANAGED_PROXIES = 20;
export const DEFAULT_SITE_RATE = 5;
export const MAX_SITE_RATE = 1000;

export const DEMO_USAGE = [
  'Usage: npm run demo [-- <flags>]',
  '',
  'The whole product on this machine, no cluster and no cloud: a local control plane, the',
  'operator with the mock provider, Managed proxies and one External proxy, the discovery API on',
  '127.0.0.1:8090, the gateway on 127.0.0.1:8888 and a demo site on 127.0.0.1:8091 (the next',
  'free ports when those are taken, said on stderr).',
  '',
  `  --proxies <n>     Managed proxies to create, 1-${MAX_MANAGED_PROXIES} (default ${DEFAULT_MANAGED_PROXIES}), beside the External one`,
  '  --token <t>       close the discovery API and the gateway with this bearer token',
  '                    (letters, digits, . _ ~ -); the printed commands carry it',
  '  --site            make the demo site strict: 403 to one proxy (demo-external, the banned',
  '                    proxy) and 429 with Retry-After above a per-source rate',
  `  --site-rate <n>   the strict site's requests per second per source address, 1-${MAX_SITE_RATE}`,
  `                    (default ${DEFAULT_SITE_RATE}; implies --site)`,
  '  --no-wait         run the walkthrough and exit (tests and CI use it)',
  '  --help, -h        print this help',
  '',
  'Flags take their value as the next argument or after "=" (--proxies=3).',
  'LOG_LEVEL (env) sets the operator log level on stderr (default warn).',
].join('\n');

/** What the demo starts, beyond the defaults. */
export interface DemoOptions {
  managedProxies: number;
  /** The discovery API's (and so the gateway's) bearer token; unset = the API is open. */
  token?: string;
  /** The strict demo site's rules; unset = every page answers 200. */
  site?: { ratePerSecond: number };
}

export type DemoArgs =
  { kind: 'help' } | ({ kind: 'run'; wait: boolean } & DemoOptions) | { kind: 'error'; message: string };

const VALUE_FLAGS = ['--proxies', '--token', '--site-rate'] as const;
type ValueFlag = (typeof VALUE_FLAGS)[number];

/** A whole number in [min, max], or the error naming the flag. */
function wholeNumber(flag: ValueFlag, raw: string, min: number, max: number): number | string {
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max)
    return `${flag} must be a whole number from ${min} to ${max}, got "${raw}"`;
  return Number(raw);
}

export function demoArgs(argv: readonly string[]): DemoArgs {
  if (argv.some((a) => a === '--help' || a === '-h')) return { kind: 'help' };
  let wait = true;
  let managedProxies = DEFAULT_MANAGED_PROXIES;
  let token: string | undefined;
  let strict = false;
  let ratePerSecond = DEFAULT_SITE_RATE;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--no-wait') {
      wait = false;
      continue;
    }
    if (arg === '--site') {
      strict = true;
      continue;
    }
    const eq = arg.indexOf('=');
    const flag = (eq > 0 ? arg.slice(0, eq) : arg) as ValueFlag;
    if (!VALUE_FLAGS.includes(flag)) return { kind: 'error', message: `unknown argument "${arg}"` };
    let value: string;
    if (eq > 0) value = arg.slice(eq + 1);
    else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) value = argv[++i];
    else return { kind: 'error', message: `${flag} needs a value` };
    if (flag === '--token') {
      // It goes unquoted into URLs (the gateway's password) and into the printed commands.
      // The value is not echoed: it is a secret.
      if (!/^[A-Za-z0-9._~-]+$/.test(value))
        return { kind: 'error', message: '--token must be letters, digits and . _ ~ - only, and not empty' };
      token = value;
      continue;
    }
    const n =
      flag === '--proxies'
        ? wholeNumber(flag, value, 1, MAX_MANAGED_PROXIES)
        : wholeNumber(flag, value, 1, MAX_SITE_RATE);
    if (typeof n === 'string') return { kind: 'error', message: n };
    if (flag === '--proxies') managedProxies = n;
    else {
      ratePerSecond = n;
      strict = true;
    }
  }
  return {
    kind: 'run',
    wait,
    managedProxies,
    ...(token === undefined ? {} : { token }),
    ...(strict ? { site: { ratePerSecond } } : {}),
  };
}
