import { createHash, createHmac } from 'node:crypto';
import type { ProxyCredentials } from '../providers/contract.js';

// What the Proxy's annotations (readable by far more people than its Secret) record of its
// credentials: digests keyed with the operator's credentials key (an HMAC-SHA-256), so whoever
// reads Proxies cannot test guesses of a hand-set password against them. Earlier versions
// wrote unkeyed SHA-256 digests ("legacy"), of the same shape (16 hex digits: instance names,
// labels and tests rely on it). A record is recognised as legacy by its value, not its shape:
// it equals the unkeyed digest of what is wanted now (a keyed value does so with odds of
// 2^-64). It is then compared in that form and rewritten keyed, so an upgrade replaces nothing.

/** Bytes of key the operator draws, and the fewest it accepts. */
export const CREDENTIALS_KEY_BYTES = 32;

function credentialsText(credentials: ProxyCredentials): string {
  return `proxy-operator-credentials\0${credentials.username}\0${credentials.password}`;
}

/** HMAC-SHA-256 of the credentials under the operator's key (hex): what the spec hash covers. */
export function credentialsFingerprint(credentials: ProxyCredentials, key: Buffer): string {
  return createHmac('sha256', key).update(credentialsText(credentials)).digest('hex');
}

/** The unkeyed fingerprint earlier versions put in the spec hash: only compared, never written. */
export function legacyCredentialsFingerprint(credentials: ProxyCredentials): string {
  return createHash('sha256').update(credentialsText(credentials)).digest('hex');
}

/** The credentials-in-use tag: 64 bits of the keyed fingerprint. */
export function credentialsTag(credentials: ProxyCredentials, key: Buffer): string {
  return credentialsFingerprint(credentials, key).slice(0, 16);
}

/** The tag earlier versions recorded (and named the in-use copy by). */
export function legacyCredentialsTag(credentials: ProxyCredentials): string {
  return legacyCredentialsFingerprint(credentials).slice(0, 16);
}

/** Whether `tag` names these credentials: keyed, or unkeyed as an earlier version recorded it. */
export function tagNames(tag: string, credentials: ProxyCredentials, key: Buffer): boolean {
  return tag === credentialsTag(credentials, key) || tag === legacyCredentialsTag(credentials);
}

/** A keyed spec hash of `canonical` (spec-hash.ts builds it): 16 hex digits, as before. */
export function keyedHash(canonical: string, key: Buffer): string {
  return createHmac('sha256', key).update(canonical).digest('hex').slice(0, 16);
}

/** The unkeyed spec hash of earlier versions. */
export function legacyHash(canonical: string): string {
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}

/** The revision wanted now, and the keyed value to record in place of a legacy one. */
export interface DesiredRevision {
  /** What the state machine compares with the recorded spec hash. */
  hash: string;
  /** Set when the recorded value is the legacy form of the wanted revision: write this instead. */
  rewrite?: string;
}

/**
 * The wanted revision given the recorded spec hash and the wanted one in both forms. A record
 * equal to the unkeyed form is an earlier version's record of an unchanged spec: it stands (the
 * instance, named by it, is kept) and is to be rewritten keyed. Anything else is compared with
 * the keyed form, so a real change made before the upgrade still replaces.
 */
export function desiredRevision(
  recorded: string | undefined,
  wanted: { keyed: string; legacy: string },
): DesiredRevision {
  if (recorded !== undefined && recorded === wanted.legacy && recorded !== wanted.keyed)
    return { hash: recorded, rewrite: wanted.keyed };
  return { hash: wanted.keyed };
}
