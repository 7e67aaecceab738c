import { createHash } from 'node:crypto';

/** Hex digits of the UID hash kept in a name: 48 bits, ample for a fleet of tens. */
const HASH_CHARS = 12;

/**
 * The deterministic instance name for a Proxy UID: 'proxy-' + a short lowercase hex hash.
 * Deterministic so a create repeated after a crash finds the instance it already made;
 * valid as a GCP instance name (RFC 1035, <= 63) and as a Pod name (DNS-1123).
 */
export function instanceName(uid: string): string {
  if (typeof uid !== 'string' || uid.trim() === '') {
    throw new Error('instanceName: the Proxy UID is empty; an instance needs its owner UID to be named');
  }
  return `proxy-${createHash('sha256').update(uid).digest('hex').slice(0, HASH_CHARS)}`;
}
