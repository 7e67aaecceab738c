// Rotation on bans needs agreement (issue 48 item 2): a cooldown counts toward
// spec.rotation.whenCoolingDownOn only when more than one token reported it while it runs,
// or a token the tokens file trusts for it (`rotation-trusted`) did. One token alone can bench
// proxies for everyone (a ban protects every team) but cannot make the operator throw an IP
// away. The book keeps, per (proxy, target), each reporter's name with the end of the
// cooldown its report gave; a trusted reporter is kept under TRUSTED_REPORTER too. Pure.

/** The reporter key that stands for "a trusted token reported it". */
export const TRUSTED_REPORTER = '*';
/** Reporters remembered per (proxy, target): two distinct ones and the trusted mark decide. */
export const MAX_REPORTERS = 3;

/** Whether the reports behind a running cooldown agree: 2+ distinct tokens, or a trusted one. */
export function agreed(reporters: ReadonlyMap<string, number>, now: number): boolean {
  let distinct = 0;
  for (const [name, until] of reporters) {
    if (until <= now) continue;
    if (name === TRUSTED_REPORTER) return true;
    distinct++;
  }
  return distinct >= 2;
}

/**
 * The tokens whose reports keep a cooldown running, as ProxyCooldown carries them (none: no
 * field). Neither the trusted mark nor the operator's own reports ('') are tokens.
 */
export function runningReporters(
  reporters: ReadonlyMap<string, number>,
  now: number,
): { reporters?: string[] } {
  const names: string[] = [];
  for (const [name, until] of reporters)
    if (until > now && name !== TRUSTED_REPORTER && name !== '') names.push(name);
  return names.length === 0 ? {} : { reporters: names };
}

/**
 * Records one report's reporter (and the trusted mark) with its cooldown's end, keeping at
 * most MAX_REPORTERS: those whose cooldown ended go first, then the earliest to end.
 */
export function withReporter(
  reporters: Map<string, number>,
  name: string,
  trusted: boolean,
  until: number,
  now: number,
): void {
  const put = (key: string) => {
    reporters.set(key, Math.max(until, reporters.get(key) ?? 0));
  };
  put(name);
  if (trusted) put(TRUSTED_REPORTER);
  for (const [key, end] of reporters) if (end <= now) reporters.delete(key);
  while (reporters.size > MAX_REPORTERS) {
    let first: string | undefined;
    for (const [key, end] of reporters)
      if (key !== name && key !== TRUSTED_REPORTER && (first === undefined || end < reporters.get(first)!))
        first = key;
    if (first === undefined) break;
    reporters.delete(first);
  }
}
