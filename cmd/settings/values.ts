// The value parsers every part of the settings uses: each names the flag it read.
import { MAX_TIMER_MS } from '../../framework/utils/sleep.js';

/** A start-up mistake in the flags or environment, said naming the flag or key. */
export class SettingsError extends Error {}

/** A flag's value: given, from its environment variable, or its default. */
export type FlagReader = (flag: string) => string | undefined;

export function address(flag: string, value: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(value);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 0 && port <= 65535))
    throw new SettingsError(`--${flag}: "${value}" is not host:port (e.g. :8090 or 127.0.0.1:8090)`);
  return { host: m[1] === '' ? '0.0.0.0' : m[1], port };
}
export function percent(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 100)
    throw new SettingsError(`--${flag}: "${value}" must be an integer from 0 to 100`);
  return n;
}
export function positiveInt(flag: string, value: string, min = 1, max?: number): number {
  const n = Number(value);
  if (max !== undefined && !(Number.isInteger(n) && n >= min && n <= max))
    throw new SettingsError(`--${flag}: "${value}" must be an integer from ${min} to ${max}`);
  if (!Number.isSafeInteger(n) || n < min)
    throw new SettingsError(`--${flag}: "${value}" must be an integer >= ${min}`);
  return n;
}
/** The longest a duration flag may be: what one timer holds, in seconds (24.8 days). */
export const MAX_DURATION_SECONDS = Math.floor(MAX_TIMER_MS / 1000);
/**
 * A duration in seconds. Beyond what a Node timer holds, a raw timer fires after 1 ms (a
 * timeout that always expires, a wait that never waits): refused, naming the flag.
 */
export function seconds(flag: string, value: string, min = 1): number {
  return atMost(flag, value, positiveInt(flag, value, min), MAX_DURATION_SECONDS, 's');
}
/** A duration in milliseconds, bounded as `seconds`. */
export function millis(flag: string, value: string, min: number): number {
  return atMost(flag, value, positiveInt(flag, value, min), MAX_TIMER_MS, 'ms');
}
function atMost(flag: string, value: string, n: number, max: number, unit: string): number {
  if (n > max)
    throw new SettingsError(
      `--${flag}: "${value}" must be at most ${max} ${unit} (24.8 days, the longest a timer waits)`,
    );
  return n;
}
export function positiveNumber(flag: string, value: string): number {
  const n = Number(value);
  if (!(value.trim() !== '' && Number.isFinite(n) && n > 0))
    throw new SettingsError(`--${flag}: "${value}" must be a positive number`);
  return n;
}
export function bool(flag: string, value: string): boolean {
  if (['true', '1', 'yes'].includes(value)) return true;
  if (['false', '0', 'no'].includes(value)) return false;
  throw new SettingsError(`--${flag}: "${value}" must be true or false`);
}
/** `403,451`: HTTP status codes, or none (an empty value reports nothing). */
export function statusCodes(flag: string, value: string): number[] {
  const out: number[] = [];
  for (const item of value
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '')) {
    if (!/^[1-5]\d\d$/.test(item))
      throw new SettingsError(`--${flag}: "${item}" is not an HTTP status code (100-599)`);
    if (!out.includes(Number(item))) out.push(Number(item));
  }
  return out;
}
/** A label value every provider accepts (GCP's are the narrowest: lower case, digits, '-', '_'). */
export function clusterName(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^[a-z0-9]([-a-z0-9_]{0,61}[a-z0-9])?$/.test(value))
    throw new SettingsError(
      `--${flag}: "${value}" must be 1-63 lower-case letters, digits, '-' or '_', starting and ending with a letter or digit (it is a label value on every instance)`,
    );
  return value;
}
