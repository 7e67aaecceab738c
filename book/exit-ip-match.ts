// The exit IP term of a lease request: one address or a CIDR block, IPv4 or IPv6. Pure.
import { isIP } from 'node:net';

/** A parsed term: the network's bits, the prefix length that must agree, and the family. */
export interface ExitIPTerm {
  /** As the client wrote it, canonicalized (what a refusal message quotes). */
  readonly text: string;
  readonly family: 4 | 6;
  readonly network: bigint;
  readonly prefix: number;
}

/** An address as a number and its family; undefined if `text` is not an IP address. */
export function ipBits(text: string): { family: 4 | 6; bits: bigint } | undefined {
  const family = isIP(text);
  if (family === 4) {
    const bits = text.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
    return { family: 4, bits };
  }
  if (family !== 6 || text.includes('%')) return undefined;
  // The URL parser writes the canonical compressed form, with an embedded IPv4 as hex groups.
  const canonical = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  const [head, tail = ''] = canonical.split('::');
  const groups = (part: string): string[] => (part === '' ? [] : part.split(':'));
  const left = groups(head);
  const right = canonical.includes('::') ? groups(tail) : [];
  const all = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const bits = all.reduce((acc, group) => (acc << 16n) | BigInt(parseInt(group, 16)), 0n);
  // An IPv4-mapped address is that IPv4 address (exit IPs are recorded so).
  if (bits >> 32n === 0xffffn) return { family: 4, bits: bits & 0xffffffffn };
  return { family: 6, bits };
}

function bitsToText(family: 4 | 6, bits: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((s) => String((bits >> s) & 255n)).join('.');
  const groups = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((s) => ((bits >> s) & 0xffffn).toString(16));
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

/**
 * `203.0.113.7`, `203.0.113.0/24`, `2001:db8::/32` ...; undefined when it is none of these.
 * A CIDR with host bits set (`203.0.113.7/24`) is refused: it usually means a typo, and
 * silently widening it would lease proxies the client did not ask for.
 */
export function parseExitIPTerm(text: string): ExitIPTerm | undefined {
  const slash = text.indexOf('/');
  const address = ipBits(slash < 0 ? text : text.slice(0, slash));
  if (address === undefined) return undefined;
  const width = address.family === 4 ? 32 : 128;
  let prefix = width;
  if (slash >= 0) {
    const digits = text.slice(slash + 1);
    if (!/^(0|[1-9][0-9]{0,2})$/.test(digits)) return undefined;
    prefix = Number(digits);
    if (prefix > width) return undefined;
  }
  const hostBits = BigInt(width - prefix);
  if ((address.bits >> hostBits) << hostBits !== address.bits) return undefined;
  const canonical = bitsToText(address.family, address.bits);
  return {
    text: prefix === width ? canonical : `${canonical}/${prefix}`,
    family: address.family,
    network: address.bits,
    prefix,
  };
}

/** Whether a proxy whose exit IP is `exitIP` (undefined: not known) falls in `term`. */
export function exitIPMatches(term: ExitIPTerm, exitIP: string | undefined): boolean {
  if (exitIP === undefined) return false;
  const address = ipBits(exitIP);
  if (address === undefined || address.family !== term.family) return false;
  const hostBits = BigInt((term.family === 4 ? 32 : 128) - term.prefix);
  return address.bits >> hostBits === term.network >> hostBits;
}

/**
 * An exit IP's place in the books' exit-IP order (issue 47 item 4): its family's digit, then
 * its bits as fixed-width hex ('4' and 8 digits, '6' and 32), so that the string order is
 * the address order and a CIDR block is one range of it; '' when it is not an address.
 */
export function exitKey(exitIP: string | undefined): string {
  if (exitIP === undefined) return '';
  const address = ipBits(exitIP);
  if (address === undefined) return '';
  return keyOf(address.family, address.bits);
}

/** The keys of a block's first and last addresses: its members' keys are those between, inclusive. */
export function blockKeys(term: ExitIPTerm): { first: string; last: string } {
  const hostBits = BigInt((term.family === 4 ? 32 : 128) - term.prefix);
  return {
    first: keyOf(term.family, term.network),
    last: keyOf(term.family, term.network | ((1n << hostBits) - 1n)),
  };
}

/** Records are immutable: each one's exit member ("key\0id"; '' without an exit) is computed once. */
const members = new WeakMap<object, string>();

/**
 * A proxy's place in an exit-IP-ordered set (the memory store's counts): its exit key, then its
 * id ('': no exit known); a block's members lie from blockKeys' first to its last + '\u0001'.
 */
export function exitMember(record: { readonly id: string; readonly exitIP?: string }): string {
  let member = members.get(record);
  if (member === undefined) {
    const key = exitKey(record.exitIP);
    member = key === '' ? '' : `${key}\u0000${record.id}`;
    members.set(record, member);
  }
  return member;
}

/** The bounds of a block's members in an exit-IP-ordered set: from (inclusive), to (exclusive). */
export function blockRange(term: ExitIPTerm): { from: string; to: string } {
  const { first, last } = blockKeys(term);
  return { from: first, to: `${last}\u0001` };
}

function keyOf(family: 4 | 6, bits: bigint): string {
  return `${family}${bits.toString(16).padStart(family === 4 ? 8 : 32, '0')}`;
}
