import { createHash, randomBytes } from 'node:crypto';

// The "$1$" MD5-crypt password hash (FreeBSD's, which glibc's crypt() and Squid's
// basic_ncsa_auth read). Node has no crypt(3); this is the published algorithm, checked
// against `openssl passwd -1` by its unit test and against basic_ncsa_auth by squid.int.
// The passwords it hashes are the operator's own 144-bit random ones (or whatever a user
// rotates in): the hash only keeps them out of the Pod spec in plain text.

const ITOA64 = './0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const MAGIC = '$1$';

function md5(...parts: Buffer[]): Buffer {
  const h = createHash('md5');
  for (const p of parts) h.update(p);
  return h.digest();
}

function to64(value: number, chars: number): string {
  let out = '';
  for (let v = value; chars > 0; chars--, v >>= 6) out += ITOA64[v & 0x3f];
  return out;
}

/** A random 8-character salt from crypt's alphabet. */
export function randomSalt(): string {
  return [...randomBytes(8)].map((b) => ITOA64[b & 0x3f]).join('');
}

/** `$1$<salt>$<hash>` of `password`; `salt` is cut to 8 characters, as crypt does. */
export function md5Crypt(password: string, salt: string = randomSalt()): string {
  const pw = Buffer.from(password, 'utf8');
  const s = Buffer.from(salt.slice(0, 8), 'utf8');
  const magic = Buffer.from(MAGIC);
  const alternate = md5(pw, s, pw);
  const parts: Buffer[] = [pw, magic, s];
  for (let left = pw.length; left > 0; left -= 16) parts.push(alternate.subarray(0, Math.min(16, left)));
  for (let i = pw.length; i > 0; i >>= 1) parts.push(i & 1 ? Buffer.alloc(1) : pw.subarray(0, 1));
  let digest = md5(...parts);
  for (let round = 0; round < 1000; round++) {
    const step: Buffer[] = [round & 1 ? pw : digest];
    if (round % 3) step.push(s);
    if (round % 7) step.push(pw);
    step.push(round & 1 ? digest : pw);
    digest = md5(...step);
  }
  const d = digest;
  const encoded =
    to64((d[0] << 16) | (d[6] << 8) | d[12], 4) +
    to64((d[1] << 16) | (d[7] << 8) | d[13], 4) +
    to64((d[2] << 16) | (d[8] << 8) | d[14], 4) +
    to64((d[3] << 16) | (d[9] << 8) | d[15], 4) +
    to64((d[4] << 16) | (d[10] << 8) | d[5], 4) +
    to64(d[11], 2);
  return `${MAGIC}${salt.slice(0, 8)}$${encoded}`;
}
