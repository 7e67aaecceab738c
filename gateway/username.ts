// The proxy username's grammar: the options of a request, as the commercial gateways carry
// them (`session-abc123-geo-eu`). A pure function; docs/gateway.md is its specification and
// test/gateway/username.unit.test.ts its table.
//
//   username = "" | pair *( "-" pair )
//   pair     = key "-" value
//   key      = "session" | "ttl" | an attribute key some proxy carries
//   key, value: 1+ of [A-Za-z0-9._~], "--" (a literal "-") or %XX (percent-escapes, decoded
//               after splitting: "-" may also be %2D, ":" is %3A, "%" is %25)
//
// "--" is the friendly escape: it survives a proxy URL unchanged (clients percent-decode a URL's
// userinfo, so %2D there must be written %252D), and it was never valid before (an empty value),
// so no username that parsed before means something else now.
// Unknown keys are an error (a mistyped `sesion-…` must not silently mean "no session").

export interface UsernameOptions {
  session?: string;
  ttlSeconds?: number;
  selector: Record<string, string>;
}

export type UsernameParse = { ok: true; options: UsernameOptions } | { ok: false; message: string };

export const MAX_SESSION_LENGTH = 128;
/** What the lease book accepts as a session key (the discovery API's pattern). */
const SESSION_PATTERN = /^[A-Za-z0-9._:@-]+$/;
const PART_PATTERN = /^(?:[A-Za-z0-9._~]|%[0-9A-Fa-f]{2})+$/;
const TTL_PATTERN = /^(\d{1,7})([smh]?)$/;
const UNIT_SECONDS: Record<string, number> = { '': 1, s: 1, m: 60, h: 3600 };
/** Usernames longer than this are refused before any work (Basic auth has no limit of its own). */
export const MAX_USERNAME_LENGTH = 1024;

export interface UsernameLimits {
  /** Attribute keys a username may select on (the catalog's, read live). */
  attributeKeys: ReadonlySet<string>;
  maxTTLSeconds: number;
}

export function parseUsername(username: string, limits: UsernameLimits): UsernameParse {
  const options: UsernameOptions = { selector: {} };
  if (username === '') return { ok: true, options };
  if (username.length > MAX_USERNAME_LENGTH)
    return fail(`username is longer than ${MAX_USERNAME_LENGTH} characters`);
  const parts = splitParts(username);
  const seen = new Set<string>();
  for (let i = 0; i < parts.length; i += 2) {
    const rawKey = parts[i];
    const rawValue = parts[i + 1];
    const key = decodePart(rawKey);
    if (key === undefined)
      return fail(
        `option name ${JSON.stringify(shown(rawKey))} must be letters, digits, '.', '_', '~' or %XX escapes`,
      );
    if (rawValue === undefined)
      return fail(`option "${shown(key)}" has no value (expected "${shown(key)}-<value>")`);
    const value = decodePart(rawValue);
    if (value === undefined)
      return fail(
        `the value of "${shown(key)}" must be letters, digits, '.', '_', '~' or %XX escapes (write '-' as '--')`,
      );
    if (seen.has(key)) return fail(`option "${shown(key)}" is given twice`);
    seen.add(key);
    if (key === 'session') {
      if (value.length > MAX_SESSION_LENGTH || !SESSION_PATTERN.test(value))
        return fail(
          `session must be 1 to ${MAX_SESSION_LENGTH} characters of letters, digits, '.', '_', ':', '@', '-'`,
        );
      options.session = value;
    } else if (key === 'ttl') {
      const m = TTL_PATTERN.exec(value);
      const seconds = m === null ? NaN : Number(m[1]) * UNIT_SECONDS[m[2]];
      if (!(seconds >= 1 && seconds <= limits.maxTTLSeconds))
        return fail(
          `ttl must be 1 to ${limits.maxTTLSeconds} seconds, as a number with an optional s, m or h (ttl-90, ttl-5m), got "${shown(value)}"`,
        );
      options.ttlSeconds = seconds;
    } else if (limits.attributeKeys.has(key)) {
      options.selector[key] = value;
    } else {
      const known = ['session', 'ttl', ...[...limits.attributeKeys].sort()].slice(0, 20).join(', ');
      return fail(`unknown option "${shown(key)}" (known: ${known})`);
    }
  }
  return { ok: true, options };
}

/** Splits on "-", where "--" is a literal "-" inside a part (kept as %2D, decoded with the rest). */
function splitParts(username: string): string[] {
  const parts: string[] = [];
  let part = '';
  for (let i = 0; i < username.length; i++) {
    if (username[i] !== '-') part += username[i];
    else if (username[i + 1] === '-') {
      part += '%2D';
      i++;
    } else {
      parts.push(part);
      part = '';
    }
  }
  parts.push(part);
  return parts;
}

function decodePart(part: string): string | undefined {
  if (!PART_PATTERN.test(part)) return undefined;
  if (!part.includes('%')) return part;
  try {
    return decodeURIComponent(part);
  } catch {
    return undefined; // an escape that is not UTF-8
  }
}

/** Echoes enough of what was sent to recognise it, never a whole oversized one. */
function shown(text: string): string {
  return text.length > 64 ? `${text.slice(0, 61)}...` : text;
}

function fail(message: string): UsernameParse {
  return { ok: false, message: `proxy username: ${message}` };
}
