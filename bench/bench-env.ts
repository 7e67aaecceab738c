// What every bench reads from its environment and prints beside its figures.
import { loadavg } from 'node:os';

/** An environment variable's positive number, or `fallback` when unset; anything else stops the bench naming it. */
export function envPositiveNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`${name} must be a positive number, got '${raw}'`);
  return value;
}

/** The 1, 5 and 15 minute load averages ("8.50 9.32 9.11"): a figure is recorded beside them. */
export function loadAverages(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
}
