// The controller's flags (sweeps, probes, replacements) and which components the process runs.
import type { Component } from '../../handlers/components.js';
import type { Cap, MaxUnavailable } from '../../handlers/replacement-budget.js';
import type { ControllerSettings } from '../../handlers/settings.js';
import type { LeaseStoreSettings } from './book.js';
import { bool, millis, percent, positiveInt, seconds, SettingsError, type FlagReader } from './values.js';

export const COMPONENTS: readonly Component[] = ['controller', 'discovery', 'gateway'];

export function controllerSettings(get: FlagReader): ControllerSettings {
  return {
    orphanSweepIntervalSeconds: seconds('orphan-sweep-interval', get('orphan-sweep-interval')!),
    orphanMinAgeSeconds: seconds('orphan-min-age', get('orphan-min-age')!, 0),
    healthConcurrency: positiveInt('health-concurrency', get('health-concurrency')!),
    recheckIntervalMillis: millis('recheck-interval', get('recheck-interval')!, 50),
    maxUnavailable: parseMaxUnavailable('max-unavailable', get('max-unavailable')!),
    replaceUnhealthyAfterSeconds: seconds('replace-unhealthy-after', get('replace-unhealthy-after')!, 0),
    repairHoldUnhealthyPercent: percent(
      'repair-hold-unhealthy-percent',
      get('repair-hold-unhealthy-percent')!,
    ),
    exitIPAllowNonPublic: bool('exit-ip-allow-non-public', get('exit-ip-allow-non-public')!),
    rotationDrainSeconds: seconds('rotation-drain-timeout', get('rotation-drain-timeout')!, 0),
    instancePollSeconds: seconds('instance-poll-interval', get('instance-poll-interval')!),
  };
}

export function components(flag: string, value: string, store: LeaseStoreSettings): Component[] {
  const names = value
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
  const out: Component[] = [];
  for (const name of names) {
    if (!COMPONENTS.includes(name as Component))
      throw new SettingsError(`--${flag}: "${name}" is not a component (controller, discovery, gateway)`);
    if (!out.includes(name as Component)) out.push(name as Component);
  }
  if (out.length === 0)
    throw new SettingsError(`--${flag}: "${value}" names no component (controller, discovery, gateway)`);
  for (const part of ['discovery', 'gateway'] as const)
    if (out.includes(part) && !out.includes('controller') && store.kind === 'memory')
      throw new SettingsError(
        `--${flag}: ${part} without controller needs --lease-store=redis (a memory book would not be the health engine's, and each replica would keep its own)`,
      );
  return out;
}
function cap(flag: string, value: string): Cap {
  const m = /^(\d+)(%?)$/.exec(value);
  const n = m ? Number(m[1]) : NaN;
  if (!m || n < 1 || (m[2] && n > 100))
    throw new SettingsError(`--${flag}: "${value}" must be an integer >= 1 or a percentage 1%..100%`);
  return m[2] ? { kind: 'percent', value: n } : { kind: 'count', value: n };
}
/** `25%` or `2` (every provider), then optional `<provider>=<cap>` overrides, comma-separated. */
export function parseMaxUnavailable(flag: string, value: string): MaxUnavailable {
  const result: { default?: Cap; byProvider: Record<string, Cap> } = { byProvider: {} };
  for (const item of value.split(',').map((x) => x.trim())) {
    const eq = item.indexOf('=');
    if (eq < 0) {
      if (result.default) throw new SettingsError(`--${flag}: "${value}" sets the default cap twice`);
      result.default = cap(flag, item);
      continue;
    }
    const name = item.slice(0, eq);
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name))
      throw new SettingsError(`--${flag}: "${name}" is not a provider name`);
    if (result.byProvider[name]) throw new SettingsError(`--${flag}: provider "${name}" is given twice`);
    result.byProvider[name] = cap(flag, item.slice(eq + 1));
  }
  return { default: result.default ?? { kind: 'percent', value: 25 }, byProvider: result.byProvider };
}
/** Every provider `--max-unavailable` names must be configured: a typo would silently do nothing. */
export function checkMaxUnavailableProviders(setting: MaxUnavailable, configured: readonly string[]): void {
  for (const name of Object.keys(setting.byProvider)) {
    if (!configured.includes(name))
      throw new SettingsError(
        `--max-unavailable: provider "${name}" is not configured (configured: ${configured.join(', ') || 'none'})`,
      );
  }
}
