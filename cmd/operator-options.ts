// From parsed settings to what the operator is built with: a pure mapping, so every flag's
// way into the handlers is checked by a table test instead of read off the entry point.
import { needsLeader } from '../handlers/components.js';
import { DEFAULT_HANDLER_SETTINGS, type HandlerSettings } from '../handlers/settings.js';
import type { Settings } from './settings.js';

/** What start-up learned before the mapping: the resolved owner identity and the probe CA's contents. */
export interface StartupFacts {
  clusterName: string;
  /** The contents of --probe-ca-file, when given. */
  probeCA?: string;
}

export function handlerSettingsFrom(settings: Settings, facts: StartupFacts): HandlerSettings {
  const auth = settings.discoveryAuth;
  return {
    ...DEFAULT_HANDLER_SETTINGS,
    ...settings.controller,
    ownerID: facts.clusterName,
    probeCA: facts.probeCA,
    discovery: {
      ...settings.discovery,
      token: auth.kind === 'token' ? auth.token : '',
      ...(auth.kind === 'tokens-file' ? { tokensFile: auth.path } : {}),
    },
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
