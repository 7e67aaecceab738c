// What the Redis book's fleet registry (redis-scripts.ts: P:fleet) must hold for a replica to
// trust its counts (issue 47 item 4): this replica's leasable proxies with their caps, as a
// count and two XOR sums of 31-bit hashes of (id, cap). The registry keeps the same three
// figures over its members; when they are equal the registry's members are this replica's
// candidates (a 62-bit sum: a differing set passes by chance once in ~4.6e18), so a count
// over the registry (full, cooling for a target) is a count over them. Otherwise the walk.
// The same figures per class (proxy-classes.ts): a member's hashes cover its class too, so a
// proxy the book files under another class than this replica's differs in both sums, and the
// figures of a class are compared when a request matches it.
// 31 bits each: Redis's Lua `bit` works on signed 32-bit integers, so both sides stay positive.

/** A proxy's two hashes, as the registry stores and XORs them. */
export type MemberHash = readonly [number, number];

const MASK = 0x7fffffff;

/** FNV-1a over the text's UTF-16 units from a basis, folded to 31 bits. */
function fnv1a(text: string, basis: number): number {
  let h = basis;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h ^ (h >>> 31)) & MASK;
}

/**
 * The hashes of a leasable proxy with this cap (its maxLeases) in this class (classID; '':
 * none) egressing from this exit (exit-ip-match.ts's exitKey; '': none known): a replica
 * whose fingerprint equals the book's agrees with it on every member's exit too, so the book's
 * members in an exit-IP block are this replica's.
 */
export function memberHash(id: string, cap: number, cls = '', exit = ''): MemberHash {
  let text = cls === '' ? `${id}\u0000${cap}` : `${id}\u0000${cap}\u0000${cls}`;
  if (exit !== '') text += `\u0000x${exit}`;
  return [fnv1a(text, 0x811c9dc5), fnv1a(text, 0x01000193 ^ 0x5bd1e995)];
}

/**
 * A class's name in the book (proxy-classes.ts's classKey, 62 bits of it as 16 hex digits):
 * short to send and to key by. Two classes sharing one (once in ~4.6e18, the odds the
 * fingerprint takes) count as one on both sides: a refusal of both is a refusal of each.
 */
export function classID(key: string): string {
  const hex = (h: number) => h.toString(16).padStart(8, '0');
  return hex(fnv1a(key, 0x811c9dc5)) + hex(fnv1a(key, 0x01000193 ^ 0x5bd1e995));
}

/** The figures a registry (or a replica's candidates) is compared by. */
export interface Fingerprint {
  count: number;
  a: number;
  b: number;
}

/** A registry member as a replica sees it. */
export interface Member {
  cap: number;
  /** Its class (classID; '': none given). */
  cls: string;
  /** Its exit IP's key (exit-ip-match.ts's exitKey; '': none known). */
  exit: string;
  hash: MemberHash;
}

/**
 * A replica's fingerprint, kept as members come, change and go: of all its members, and of
 * each class's (the figures a request with a selector or a scope is counted by).
 */
export class FleetFingerprint {
  private readonly members = new Map<string, Member>();
  private figures: Fingerprint = { count: 0, a: 0, b: 0 };
  private readonly classes = new Map<string, Fingerprint>();

  /** The proxy is leasable with this cap in this class from this exit (cap undefined: it is not, or gone). */
  set(id: string, cap: number | undefined, cls = '', exit = ''): void {
    const old = this.members.get(id);
    if (old !== undefined && old.cap === cap && old.cls === cls && old.exit === exit) return;
    if (old !== undefined) {
      this.members.delete(id);
      this.figures = toggle(this.figures, old.hash, -1);
      this.toggleClass(old.cls, old.hash, -1);
    }
    if (cap !== undefined) {
      const hash = memberHash(id, cap, cls, exit);
      this.members.set(id, { cap, cls, exit, hash });
      this.figures = toggle(this.figures, hash, +1);
      this.toggleClass(cls, hash, +1);
    }
  }

  get(): Fingerprint {
    return this.figures;
  }

  /** A class's figures (all zeros: no member). */
  ofClass(cls: string): Fingerprint {
    return this.classes.get(cls) ?? { count: 0, a: 0, b: 0 };
  }

  /** A member's cap, class and hashes, or undefined when the proxy is not one. */
  member(id: string): Member | undefined {
    return this.members.get(id);
  }

  ids(): IterableIterator<string> {
    return this.members.keys();
  }

  private toggleClass(cls: string, hash: MemberHash, delta: 1 | -1): void {
    if (cls === '') return;
    const figures = toggle(this.ofClass(cls), hash, delta);
    if (figures.count === 0) this.classes.delete(cls);
    else this.classes.set(cls, figures);
  }
}

/** Figures with one member's hashes in (+1) or out (-1). */
function toggle({ count, a, b }: Fingerprint, hash: MemberHash, delta: 1 | -1): Fingerprint {
  return { count: count + delta, a: a ^ hash[0], b: b ^ hash[1] };
}
