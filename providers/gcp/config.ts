import type { ConfigObject } from '../config-reader.js';

export interface GcpSettings {
  project: string;
  /** Network name ("default") or a full network path. */
  network: string;
  /** Network tags: what firewall rules allowing the proxy port target. */
  networkTags: string[];
  /** Per-call deadline; the library's own default is 600 s, far too long for a reconcile. */
  requestTimeoutSeconds: number;
  /** How long an accepted insert may stay invisible before it counts as failed. */
  createTimeoutMinutes: number;
}

export const GCP_DEFAULTS = {
  network: 'default',
  networkTags: ['proxy'],
  requestTimeoutSeconds: 30,
  createTimeoutMinutes: 10,
} as const;

/** GCP network tags: RFC 1035 labels. */
const TAG_PATTERN = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Reads the `gcp:` block: project is required, the rest defaults. Auth is ADC only. */
export function parseGcpConfig(block: ConfigObject): GcpSettings {
  const networkTags = block.stringList('networkTags', GCP_DEFAULTS.networkTags);
  networkTags.forEach((tag, i) => {
    if (!TAG_PATTERN.test(tag))
      block.fail(`networkTags[${i}]`, `"${tag}" is not a valid network tag (RFC 1035)`);
  });
  return {
    project: block.requiredString('project'),
    network: block.string('network', GCP_DEFAULTS.network),
    networkTags,
    requestTimeoutSeconds: block.number('requestTimeoutSeconds', GCP_DEFAULTS.requestTimeoutSeconds, {
      min: 1,
      max: 600,
    }),
    createTimeoutMinutes: block.number('createTimeoutMinutes', GCP_DEFAULTS.createTimeoutMinutes, { min: 1 }),
  };
}
