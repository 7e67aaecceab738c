// Who a lease and a session belong to: the name of the token that took them. Stores keep
// one namespace per owner by prefixing the keys they store with it, so another owner's lookup
// addresses another key and finds nothing (no owner check to forget, no extra round trip).

/** The owner of requests an API without authentication serves; never a valid token name. */
export const ANONYMOUS_OWNER = 'anonymous';

/**
 * Token names: lower-case letters, digits and '-', so the first '.' of a scoped key always
 * ends the owner (session keys and lease IDs may contain '.').
 */
export const OWNER_NAME_PATTERN = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The key a store keeps for `key` of `owner`; undefined (in-process use, no API) is unscoped. */
export function scopedKey(owner: string | undefined, key: string): string {
  return owner === undefined ? key : `${owner}.${key}`;
}

/** Inverse of scopedKey for a key this owner stored. */
export function unscopedKey(owner: string | undefined, scoped: string): string {
  return owner === undefined ? scoped : scoped.slice(owner.length + 1);
}
