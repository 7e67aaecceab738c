// What the Redis book's fleet registry (redis-scripts.ts: P:fleet) must hold for a replica to
// trust its counts (issue 47 item 4): this replica's leasable proxies with their caps, as a
// count and two XOR sums of 31-bit hashes of (id, cap). The registry keeps the same three
// figures over its members; when they are equal the registry's members are this replica's
// candidates (a 62-bit sum: a differing set passes by chance once in ~4.6e18), so a count
// over the registry (full, cooling for a target) is a count over them. Otherwise the walk.
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

/** The hashes of a leasable proxy with this cap (its maxLeases). */
export function memberHash(id: string, cap: number): MemberHash {
  const text = `${id}\u0000${cap}`;
  return [fnv1a(text, 0x811c9dc5), fnv1a(text, 0x01000193 ^ 0x5bd1e995)];
}

/** The figures a registry (or a replica's candidates) is compared by. */
export interface Fingerprint {
  count: number;
  a: number;
  b: number;
}

/** A replica's fingerprint, kept as members come, change and go. */
export class FleetFingerprint {
  private readonly members = new Map<string, { cap: number; hash: MemberHash }>();
  private figures: Fingerprint = { count: 0, a: 0, b: 0 };

  /** The proxy is leasable with this cap (undefined: it is not, or gone). */
  set(id: string, cap: number | undefined): void {
    const old = this.members.get(id);
    if (old !== undefined && old.cap === cap) return;
    let { count, a, b } = this.figures;
    if (old !== undefined) {
      this.members.delete(id);
      count--;
      a ^= old.hash[0];
      b ^= old.hash[1];
    }
    if (cap !== undefined) {
      const hash = memberHash(id, cap);
      this.members.set(id, { cap, hash });
      count++;
      a ^= hash[0];
      b ^= hash[1];
    }
    this.figures = { count, a, b };
  }

  get(): Fingerprint {
    return this.figures;
  }

  /** A member's cap and hashes, or undefined when the proxy is not one. */
  member(id: string): { cap: number; hash: MemberHash } | undefined {
    return this.members.get(id);
  }

  ids(): IterableIterator<string> {
    return this.members.keys();
  }
}
