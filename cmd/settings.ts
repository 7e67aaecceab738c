// The operator's settings: parsed once from flags and environment, checked once (a bad value
// stops start-up naming the flag or key), and handed on in the shapes their consumers own:
// the book's rules (`LeaseBookRules`), the controller's tuning, the discovery API's and the
// gateway's settings. The flag table is cmd/settings/flags.ts; each part's parsing is beside it.
import { parseArgs } from 'node:util';
import type { LeaseBookRules } from '../book/lease-book-settings.js';
import type { Component } from '../handlers/components.js';
import type { ControllerSettings, GatewaySettings } from '../handlers/settings.js';
import { leaseBookRules, leaseStore, type LeaseStoreSettings } from './settings/book.js';
import { components, controllerSettings } from './settings/controller.js';
import {
  discoveryAuth,
  discoveryFlags,
  type DiscoveryAuth,
  type DiscoveryFlags,
} from './settings/discovery.js';
import { OPTIONS, usage } from './settings/flags.js';
import { gatewaySettings } from './settings/gateway.js';
import { address, bool, clusterName, SettingsError } from './settings/values.js';

export { checkMaxUnavailableProviders, COMPONENTS, parseMaxUnavailable } from './settings/controller.js';
export { SettingsError } from './settings/values.js';
export { usage } from './settings/flags.js';
export type { Component, DiscoveryAuth, LeaseStoreSettings };

/** Everything the operator's entry point can be told, from flags or environment. */
export interface Settings {
  kubeconfig?: string;
  providersConfig?: string;
  /** The discovery API's address, TLS, rate limit and largest lease TTL (its tokens: `discoveryAuth`). */
  discovery: DiscoveryFlags;
  /** How clients authenticate to the discovery API (closed unless told otherwise). */
  discoveryAuth: DiscoveryAuth;
  /** The lease book's rules: cooldowns, suspicion, sessions (the book's own shape). */
  book: LeaseBookRules;
  /** The controller's sweeps, probes and replacements. */
  controller: ControllerSettings;
  metrics: { host: string; port: number };
  leaderElect: boolean;
  leaderElectionNamespace: string;
  leaderElectionID: string;
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  watchNamespace?: string;
  /** The owner identity on every instance it creates; unset = the kube-system Namespace's UID. */
  clusterName?: string;
  /** Where leases, sessions and cooldowns live. */
  leaseStore: LeaseStoreSettings;
  /** The parts this process runs (`--components`). */
  components: readonly Component[];
  /** The forward-proxy gateway's address and tuning (served when components include gateway). */
  gateway: GatewaySettings;
  /** `--probe-ca-file`: a PEM file of extra CAs the health probes trust. */
  probeCAFile?: string;
}

const LOG_LEVELS: readonly Settings['logLevel'][] = ['trace', 'debug', 'info', 'warn', 'error'];

/** Parses flags (taking precedence) and environment into Settings, or throws naming the bad one. */
export function parseSettings(argv: string[], env: NodeJS.ProcessEnv): Settings | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        help: { type: 'boolean' },
        ...Object.fromEntries(OPTIONS.map((o) => [o.flag, { type: 'string' as const }])),
      },
    });
  } catch (err) {
    throw new SettingsError(`${(err as Error).message}\n\n${usage()}`);
  }
  if (parsed.values.help) return 'help';
  const given = parsed.values as Record<string, string | boolean | undefined>;
  const get = (flag: string): string | undefined => {
    const o = OPTIONS.find((x) => x.flag === flag)!;
    const v = given[flag];
    if (typeof v === 'string') return v;
    if (o.env && env[o.env] !== undefined && env[o.env] !== '') return env[o.env];
    return o.default;
  };
  const level = get('log-level')! as Settings['logLevel'];
  if (!LOG_LEVELS.includes(level)) {
    throw new SettingsError(`--log-level: "${level}" must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const fromFlag = (flag: string): boolean => typeof given[flag] === 'string';
  const store = leaseStore(get, fromFlag, env);
  const parts = components('components', get('components')!, store);
  return {
    kubeconfig: get('kubeconfig'),
    providersConfig: get('providers-config'),
    discovery: discoveryFlags(get),
    discoveryAuth: discoveryAuth(get, env, parts.includes('discovery') || parts.includes('gateway')),
    book: leaseBookRules(get),
    controller: controllerSettings(get),
    metrics: address('metrics-address', get('metrics-address')!),
    leaderElect: bool('leader-elect', get('leader-elect')!),
    leaderElectionNamespace: get('leader-election-namespace')!,
    leaderElectionID: get('leader-election-id')!,
    logLevel: level,
    watchNamespace: get('watch-namespace'),
    clusterName: clusterName('cluster-name', get('cluster-name')),
    leaseStore: store,
    components: parts,
    gateway: gatewaySettings(get),
    probeCAFile: get('probe-ca-file'),
  };
}
