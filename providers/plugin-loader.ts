// Loads out-of-tree provider plugins listed in the providers file. Every failure is a
// ProvidersConfigError naming the plugin, so start-up stops with a message saying which
// plugin and why: not found, failed to load, or no @provider class exported.
import { readFile, stat } from 'node:fs/promises';
import { registerHooks } from 'node:module';
import { isAbsolute, join, resolve } from 'node:path';
import { ProvidersConfigError } from './config-reader.js';
import { providerClassesIn, type ProviderClass } from './provider-class.js';

/** The specifier plugins import the plugin API by (decorator, tokens, contract, errors). */
export const PLUGIN_API_SPECIFIER = 'proxy-operator/plugin';

export class PluginLoadError extends ProvidersConfigError {
  override readonly name = 'PluginLoadError';
}

/** An npm package name (scoped or not), optionally with a subpath. */
const PACKAGE_NAME = /^(@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*(\/[^/].*)?$/;

export function isPathSpec(spec: string): boolean {
  return spec.startsWith('./') || spec.startsWith('../') || isAbsolute(spec);
}

/** The package name part of a package specifier ("@scope/pkg/sub" → "@scope/pkg"). */
function packageNameOf(spec: string): string {
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/**
 * Imports one plugin and returns the provider classes it exports.
 * @param spec an npm package name (resolved from the operator's own node_modules) or a path
 *   (relative to `baseDir`, the providers file's folder, or absolute) to a module or a folder
 *   with a package.json
 * @param where what to name in messages, e.g. `providers.yaml: plugins[0] "./x.js"`
 */
export async function loadPlugin(spec: string, baseDir: string, where: string): Promise<ProviderClass[]> {
  let target: string;
  if (isPathSpec(spec)) {
    target = await moduleFile(resolve(baseDir, spec), where);
  } else if (PACKAGE_NAME.test(spec)) {
    target = spec;
  } else {
    throw new PluginLoadError(
      `${where}: neither a path (start it with ./, ../ or /) nor an npm package name`,
    );
  }

  ensurePluginApiResolvable();
  let moduleNamespace: Record<string, unknown>;
  try {
    moduleNamespace = (await import(target)) as Record<string, unknown>;
  } catch (err) {
    throw new PluginLoadError(`${where}: ${loadFailure(spec, err)}`, { cause: err });
  }
  const classes = providerClassesIn(moduleNamespace);
  if (classes.length === 0) {
    const exported = Object.keys(moduleNamespace);
    throw new PluginLoadError(
      `${where}: exports no provider class declared with @provider({ type, config }) (exports: ${exported.length ? exported.join(', ') : 'nothing'})`,
    );
  }
  return classes;
}

function loadFailure(spec: string, err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (!isPathSpec(spec)) {
    const name = packageNameOf(spec);
    // Missing itself (not one of its own dependencies): the message names it as imported from here.
    const missing =
      /Cannot find (module|package)/.test(message) &&
      message.includes(`'${name}'`) &&
      message.includes('plugin-loader');
    if (missing) {
      return `not found: no npm package "${name}" is installed next to the operator (npm install ${name} in the operator's folder, or list a path)`;
    }
  }
  return `failed to load: ${message.split('\n')[0]}`;
}

/** The file to import for a path: the file itself, or a folder's package.json entry / index.js. */
async function moduleFile(path: string, where: string): Promise<string> {
  const info = await stat(path).catch(() => undefined);
  if (!info) throw new PluginLoadError(`${where}: not found: no file or folder at ${path}`);
  if (info.isFile()) return path;
  const entry = (await packageEntry(path)) ?? 'index.js';
  const file = join(path, entry);
  if (!(await stat(file).catch(() => undefined))?.isFile()) {
    throw new PluginLoadError(`${where}: not found: the folder ${path} has no ${entry}`);
  }
  return file;
}

/** A folder's package.json entry point: exports (a string or "."), else main. */
async function packageEntry(folder: string): Promise<string | undefined> {
  let pkg: { exports?: unknown; main?: unknown };
  try {
    pkg = JSON.parse(await readFile(join(folder, 'package.json'), 'utf8')) as typeof pkg;
  } catch {
    return undefined;
  }
  const dot =
    typeof pkg.exports === 'object' && pkg.exports
      ? (pkg.exports as Record<string, unknown>)['.']
      : pkg.exports;
  const conditional =
    typeof dot === 'object' && dot
      ? ((dot as Record<string, unknown>).import ?? (dot as Record<string, unknown>).default)
      : dot;
  if (typeof conditional === 'string') return conditional;
  return typeof pkg.main === 'string' ? pkg.main : undefined;
}

let apiResolvable = false;

/** A bare package specifier (not relative, absolute, a URL or a node: builtin). */
function isBare(specifier: string): boolean {
  return !/^(\.{0,2}\/|[a-z][a-z0-9+.-]*:)/i.test(specifier);
}

/**
 * Makes plugins resolve against the operator, wherever they live (a folder an init container
 * filled, or node_modules):
 * - `proxy-operator/plugin` is this process's own plugin API module: one instance, so the
 *   decorator, DI tokens and error classes a plugin uses are the operator's;
 * - a package a plugin cannot find next to itself (reflect-metadata, prom-client…) is looked
 *   up where the operator's own packages are.
 * (Under jest, moduleNameMapper does the first; jest refuses loader hooks.)
 */
function ensurePluginApiResolvable(): void {
  if (apiResolvable) return;
  apiResolvable = true;
  const resolveHere = (import.meta as { resolve?: (specifier: string) => string }).resolve;
  if (typeof resolveHere !== 'function' || typeof registerHooks !== 'function') return;
  const apiURL = resolveHere('./plugin.js');
  const operatorURL = import.meta.url;
  try {
    registerHooks({
      resolve(specifier, context, nextResolve) {
        if (specifier === PLUGIN_API_SPECIFIER) return { url: apiURL, format: 'module', shortCircuit: true };
        try {
          return nextResolve(specifier, context);
        } catch (err) {
          const notFound = (err as NodeJS.ErrnoException | undefined)?.code === 'ERR_MODULE_NOT_FOUND';
          if (!notFound || !isBare(specifier) || context.parentURL === operatorURL) throw err;
          return nextResolve(specifier, { ...context, parentURL: operatorURL });
        }
      },
    });
  } catch {
    // A host that loads modules itself (jest) refuses hooks; it maps the name its own way.
  }
}
