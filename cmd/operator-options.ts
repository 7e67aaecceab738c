// From parsed settings to what the operator is built with: a pure mapping, so every flag's
// way into the handlers is checked by a table test instead of read off the entry point.
import { isIP } from 'node:net';
import { needsLeader } from '../handlers/components.js';
import {
  DEFAULT_HANDLER_SETTINGS,
  type DiscoverySettings,
  type HandlerSettings,
} from '../handlers/settings.js';
import type { Settings } from './settings.js';
import { endpointCheck, type ExternalEndpointSettings } from '../providers/endpoint-ranges.js';

/** What start-up learned before the mapping: the resolved owner identity and the probe CA's contents. */
export interface StartupFacts {
  clusterName: string;
  /** Where the controller gets its credentials key (cmd/credentials-key.ts). */
  credentialsKey: () => Promise<Buffer>;
  /** The contents of --probe-ca-file, when given. */
  probeCA?: string;
  /** The providers config's `external:` block, with the API server's addresses (clusterAddressesAdded). */
  externalEndpoints?: ExternalEndpointSettings;
}

/**
 * The `external:` block with the API server's own addresses added to `clusterCIDRs`: the
 * `kubernetes` Service's ClusterIP every Pod is given (KUBERNETES_SERVICE_HOST) and the host
 * of the kubeconfig's server, when each is an IP address. They cost no permission to learn, so
 * an External endpoint at the API server is refused even before an SRE lists the cluster's
 * CIDRs. An address a fixed range already refuses (a test's API server on loopback) is not
 * added: allowing that range must allow it.
 */
export function clusterAddressesAdded(
  external: ExternalEndpointSettings,
  known: { serviceHost?: string; server?: string },
): ExternalEndpointSettings {
  let serverHost: string | undefined;
  try {
    serverHost = known.server ? new URL(known.server).hostname.replace(/^\[|\]$/g, '') : undefined;
  } catch {
    serverHost = undefined;
  }
  const fixed = endpointCheck({ allowRanges: [], allowCIDRs: [], clusterCIDRs: [] });
  const added = [known.serviceHost, serverHost].filter(
    (h): h is string => h !== undefined && isIP(h) !== 0 && fixed(h) === undefined,
  );
  const clusterCIDRs = [...new Set([...external.clusterCIDRs, ...added])];
  return { ...external, clusterCIDRs };
}

/** The doors' tokens as the handlers take them: one DISCOVERY_TOKEN, or the tokens file. */
export function clientTokenSettings(
  auth: Settings['discoveryAuth'],
): Pick<DiscoverySettings, 'token' | 'tokensFile'> {
  return {
    token: auth.kind === 'token' ? auth.token : '',
    ...(auth.kind === 'tokens-file' ? { tokensFile: auth.path } : {}),
  };
}

export function handlerSettingsFrom(settings: Settings, facts: StartupFacts): HandlerSettings {
  return {
    ...DEFAULT_HANDLER_SETTINGS,
    ...settings.controller,
    ownerID: facts.clusterName,
    credentialsKey: facts.credentialsKey,
    probeCA: facts.probeCA,
    ...(facts.externalEndpoints === undefined ? {} : { externalEndpoints: facts.externalEndpoints }),
    discovery: { ...settings.discovery, ...clientTokenSettings(settings.discoveryAuth) },
    book: settings.book,
    ...(settings.components.includes('gateway') ? { gateway: settings.gateway } : {}),
  };
}

/** The Lease to campaign for, or false: a discovery-only process runs nothing leader-only. */
export function leaderElectionFrom(
  settings: Settings,
  identity: string,
): { namespace: string; name: string; identity: string } | false {
  if (!settings.leaderElect || !needsLeader(settings.components)) return false;
  return { namespace: settings.leaderElectionNamespace, name: settings.leaderElectionID, identity };
}

/**
 * Whether start-up resolves the owner identity (reading the kube-system Namespace without
 * --cluster-name): only the controller creates and sweeps instances, and a discovery-only
 * process's ServiceAccount has no access to Namespaces.
 */
export function needsOwnerIdentity(components: Settings['components']): boolean {
  return components.includes('controller');
}
