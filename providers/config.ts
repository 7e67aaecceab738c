import { readFile } from 'node:fs/promises';
import { parseDocument } from 'yaml';
import { ConfigObject, ProvidersConfigError, isMapping } from './config-reader.js';
import {
  DEFAULT_EXTERNAL_ENDPOINTS,
  ENDPOINT_RANGES,
  parseCidr,
  type ExternalEndpointSettings,
} from './endpoint-ranges.js';

/** Environment variable naming the providers config file (the --providers-config flag wins). */
export const PROVIDERS_CONFIG_ENV = 'PROXY_OPERATOR_PROVIDERS_CONFIG';

/** Reads one provider type's block (e.g. `gcp:`) into that type's typed settings. */
export type ConfigSchema<T> = (block: ConfigObject) => T;

export interface ProviderEntry<T> {
  name: string;
  type: string;
  /** What the type's schema produced from its block. */
  settings: T;
}

/** Provider names appear in Proxy specs and metric labels: keep them DNS-label shaped. */
const NAME_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** The parsed YAML root of a providers file, checked to be a mapping. */
function parseRoot(text: string, file: string): { root: Record<string, unknown>; top: ConfigObject } {
  const doc = parseDocument(text);
  if (doc.errors.length > 0) {
    throw new ProvidersConfigError(`${file}: invalid YAML: ${doc.errors[0].message}`);
  }
  const root: unknown = doc.toJS();
  if (!isMapping(root)) throw new ProvidersConfigError(`${file}: must be a mapping with a "providers" list`);
  return { root, top: new ConfigObject(root, file, '') };
}

const TOP_LEVEL_KEYS = ['plugins', 'providers', 'external'];

/** A providers file: its entries and its `external:` block (where External endpoints may be). */
export interface ProvidersConfig<T> {
  entries: ProviderEntry<T>[];
  external: ExternalEndpointSettings;
}

/** A list of addresses or CIDR ranges; each bad entry fails naming its index. */
function cidrList(block: ConfigObject, key: string): string[] {
  const list = block.stringList(key, []);
  list.forEach((c, i) => {
    if (!parseCidr(c)) block.fail(`${key}[${i}]`, `"${c}" is not an address or CIDR range`);
  });
  return list;
}

/**
 * The `external:` block: `allowEndpointRanges` (names of ENDPOINT_RANGES), `allowEndpointCIDRs`
 * and `clusterCIDRs` (addresses or CIDR ranges), all defaulting to empty: every range refused.
 */
export function parseExternalBlock(block: ConfigObject): ExternalEndpointSettings {
  const ranges = block.stringList('allowEndpointRanges', DEFAULT_EXTERNAL_ENDPOINTS.allowRanges);
  ranges.forEach((r, i) => {
    if (!(ENDPOINT_RANGES as readonly string[]).includes(r))
      block.fail(`allowEndpointRanges[${i}]`, `must be one of ${ENDPOINT_RANGES.join(', ')}, got "${r}"`);
  });
  const settings: ExternalEndpointSettings = {
    allowRanges: ranges as ExternalEndpointSettings['allowRanges'],
    allowCIDRs: cidrList(block, 'allowEndpointCIDRs'),
    clusterCIDRs: cidrList(block, 'clusterCIDRs'),
  };
  block.assertNoUnknownKeys();
  return settings;
}

/**
 * The plugin modules a providers file lists under `plugins:` (npm package names, or paths
 * relative to the file), in order. Loaded before the entries are parsed, since an entry's
 * type may come from one.
 */
export function pluginSpecs(text: string, file: string): string[] {
  const { top } = parseRoot(text, file);
  return top.stringList('plugins', []);
}

/**
 * Parses and validates a providers config. `schemas` maps each known type to the reader of
 * its block, so the file format grows with the registry, not by editing this function.
 * Throws a ProvidersConfigError naming the file, the entry and the key path.
 */
export function parseProvidersConfig<T>(
  text: string,
  file: string,
  schemas: ReadonlyMap<string, ConfigSchema<T>>,
): ProviderEntry<T>[] {
  return parseProvidersFile(text, file, schemas).entries;
}

/** As parseProvidersConfig, with the `external:` block too. */
export function parseProvidersFile<T>(
  text: string,
  file: string,
  schemas: ReadonlyMap<string, ConfigSchema<T>>,
): ProvidersConfig<T> {
  const { root, top } = parseRoot(text, file);
  if (!Array.isArray(root.providers)) top.fail('providers', 'required list of provider entries');
  for (const key of Object.keys(root)) {
    if (!TOP_LEVEL_KEYS.includes(key)) top.fail(key, `unknown key (allowed: ${TOP_LEVEL_KEYS.join(', ')})`);
  }
  top.stringList('plugins', []);
  const external = parseExternalBlock(top.object('external'));

  const seen = new Map<string, number>();
  const entries = (root.providers as unknown[]).map((raw, index) => {
    const label = `${file}: providers[${index}]`;
    if (!isMapping(raw)) throw new ProvidersConfigError(`${label}: must be a mapping with name and type`);
    const rawName = typeof raw.name === 'string' ? raw.name : undefined;
    const entry: ConfigObject = new ConfigObject(raw, rawName ? `${label} (${rawName})` : label, '');
    const name = entry.requiredString('name');
    if (!NAME_PATTERN.test(name) || name.length > 63) {
      entry.fail(
        'name',
        `"${name}" must be lowercase letters, digits and '-', starting and ending alphanumeric, <= 63 chars`,
      );
    }
    const previous = seen.get(name);
    if (previous !== undefined) entry.fail('name', `duplicate name "${name}" (also providers[${previous}])`);
    seen.set(name, index);

    const type = entry.requiredString('type');
    const schema = schemas.get(type);
    if (!schema)
      entry.fail(
        'type',
        `unknown type "${type}" (known: ${[...schemas.keys()].sort().join(', ')}; a plugin's type needs its module under plugins:)`,
      );
    const settings = schema(entry.object(type));
    entry.assertNoUnknownKeys();
    return { name, type, settings };
  });
  return { entries, external };
}

/** The text of the providers file at `path`; an unreadable file is a ProvidersConfigError. */
export async function readProvidersFile(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw new ProvidersConfigError(`${path}: cannot read providers config: ${(err as Error).message}`, {
      cause: err,
    });
  }
}
