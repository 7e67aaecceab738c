import { readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { providerClassesIn, type ProviderClass } from './provider-class.js';
import { ProviderRegistry } from './registry.js';

/**
 * The built-in provider classes: every folder under providers/ with a `plugin` module
 * (plugin.ts in the source tree, plugin.js once compiled) is imported and its
 * @provider-decorated exports are the built-ins. A new built-in provider is a new folder;
 * no list to edit. Found once, when this module loads.
 */
async function discoverBuiltins(): Promise<ProviderClass[]> {
  const here = dirname(fileURLToPath(import.meta.url));
  const folders = readdirSync(here)
    .filter((entry) => statSync(join(here, entry)).isDirectory())
    .filter((folder) =>
      ['plugin.ts', 'plugin.js'].some((f) =>
        statSync(join(here, folder, f), { throwIfNoEntry: false })?.isFile(),
      ),
    )
    .sort();
  const classes: ProviderClass[] = [];
  for (const folder of folders) {
    const found = providerClassesIn((await import(`./${folder}/plugin.js`)) as Record<string, unknown>);
    if (found.length === 0) throw new Error(`providers/${folder}/plugin exports no @provider class`);
    classes.push(...found);
  }
  return classes;
}

export const BUILTIN_PROVIDER_CLASSES: readonly ProviderClass[] = await discoverBuiltins();

/** A registry holding the providers shipped with the operator. */
export function builtinProviderRegistry(): ProviderRegistry {
  const registry = new ProviderRegistry();
  for (const cls of BUILTIN_PROVIDER_CLASSES) registry.register(cls);
  return registry;
}
