import type { Logger } from 'pino';

/** A child logger bound to one object, so every line names what it is about. */
export function objectLogger(
  base: Logger,
  kind: string,
  namespace: string | undefined,
  name: string,
): Logger {
  return base.child(namespace ? { kind, namespace, name } : { kind, name });
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
