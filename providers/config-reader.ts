// A validating reader over one YAML mapping. Every failure names the file, the provider
// entry and the key path, so an operator fixing a bad config never has to guess.

export class ProvidersConfigError extends Error {
  override readonly name: string = 'ProvidersConfigError';
}

type Mapping = Record<string, unknown>;

export function isMapping(value: unknown): value is Mapping {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return `"${value}"`;
  if (typeof value === 'object') return 'a mapping';
  return String(value);
}

export interface NumberRule {
  integer?: boolean;
  min?: number;
  max?: number;
}

/**
 * One mapping of the config file. Reads are typed and checked; keys never read are
 * rejected by assertNoUnknownKeys(), so a typo ("projet:") fails instead of being ignored.
 */
export class ConfigObject {
  private readonly read = new Set<string>();
  private readonly children: ConfigObject[] = [];

  /**
   * @param where what precedes the key path in messages, e.g. "providers.yaml: providers[1] (gcp-eu)"
   * @param path this mapping's key path inside the entry, e.g. "gcp" ('' at the entry's top)
   */
  constructor(
    private readonly value: Mapping,
    private readonly where: string,
    private readonly path: string,
  ) {}

  fail(key: string, message: string): never {
    throw new ProvidersConfigError(this.failureMessage(key, message));
  }

  /** The message fail() would throw: "<file>: <entry>: <key path>: <message>" ('' names this mapping). */
  failureMessage(key: string, message: string): string {
    const path = key ? this.keyPath(key) : this.path;
    return path ? `${this.where}: ${path}: ${message}` : `${this.where}: ${message}`;
  }

  has(key: string): boolean {
    return this.value[key] !== undefined && this.value[key] !== null;
  }

  requiredString(key: string): string {
    if (!this.has(key)) this.fail(key, 'required string');
    return this.string(key, '');
  }

  string(key: string, fallback: string): string {
    const v = this.take(key);
    if (v === undefined) return fallback;
    if (typeof v !== 'string' || v.trim() === '')
      this.fail(key, `must be a non-empty string, got ${describe(v)}`);
    return v;
  }

  /** A non-empty string, or undefined when the key is absent. */
  optionalString(key: string): string | undefined {
    return this.has(key) ? this.string(key, '') : (this.take(key) as undefined);
  }

  number(key: string, fallback: number, rule: NumberRule = {}): number {
    const v = this.take(key);
    if (v === undefined) return fallback;
    const kind = rule.integer ? 'an integer' : 'a number';
    const range =
      rule.min !== undefined && rule.max !== undefined
        ? ` from ${rule.min} to ${rule.max}`
        : rule.min !== undefined
          ? ` >= ${rule.min}`
          : rule.max !== undefined
            ? ` <= ${rule.max}`
            : '';
    const wanted = kind + range;
    const ok =
      typeof v === 'number' &&
      Number.isFinite(v) &&
      (!rule.integer || Number.isInteger(v)) &&
      (rule.min === undefined || v >= rule.min) &&
      (rule.max === undefined || v <= rule.max);
    if (!ok) this.fail(key, `must be ${wanted}, got ${describe(v)}`);
    return v as number;
  }

  boolean(key: string, fallback: boolean): boolean {
    const v = this.take(key);
    if (v === undefined) return fallback;
    if (typeof v !== 'boolean') this.fail(key, `must be true or false, got ${describe(v)}`);
    return v;
  }

  stringList(key: string, fallback: readonly string[]): string[] {
    const v = this.take(key);
    if (v === undefined) return [...fallback];
    if (!Array.isArray(v)) this.fail(key, `must be a list of strings, got ${describe(v)}`);
    v.forEach((item, i) => {
      if (typeof item !== 'string' || item === '')
        this.fail(`${key}[${i}]`, `must be a non-empty string, got ${describe(item)}`);
    });
    return v as string[];
  }

  /** One of `allowed`; the message lists them. */
  oneOf<T extends string>(key: string, allowed: readonly T[], fallback?: T): T {
    const v = fallback === undefined ? this.requiredString(key) : this.string(key, fallback);
    if (!(allowed as readonly string[]).includes(v))
      this.fail(key, `must be one of ${allowed.join(', ')}, got "${v}"`);
    return v as T;
  }

  /** A nested mapping; an absent key reads as an empty mapping so defaults apply. */
  object(key: string): ConfigObject {
    const v = this.take(key);
    if (v !== undefined && !isMapping(v)) this.fail(key, `must be a mapping, got ${describe(v)}`);
    const child = new ConfigObject(v ?? {}, this.where, this.keyPath(key));
    this.children.push(child);
    return child;
  }

  /** A nested mapping that is optional as a whole: undefined when absent. */
  optionalObject(key: string): ConfigObject | undefined {
    if (!this.has(key)) {
      this.read.add(key);
      return undefined;
    }
    return this.object(key);
  }

  assertNoUnknownKeys(): void {
    for (const key of Object.keys(this.value)) {
      if (!this.read.has(key)) {
        const allowed = [...this.read].sort().join(', ');
        this.fail(key, `unknown key${allowed ? ` (allowed: ${allowed})` : ''}`);
      }
    }
    for (const child of this.children) child.assertNoUnknownKeys();
  }

  private take(key: string): unknown {
    this.read.add(key);
    const v = this.value[key];
    return v === null ? undefined : v;
  }

  private keyPath(key: string): string {
    return this.path ? `${this.path}.${key}` : key;
  }
}
