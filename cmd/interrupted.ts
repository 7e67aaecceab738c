/** Resolves on the first Ctrl-C or SIGTERM: a tool that keeps its world up until told to clean up. */
export function interrupted(): Promise<void> {
  return new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
}
