// The one canonical form of a lease's or report's `target`: a host name, lower-case, without
// scheme, port, path or trailing dot (`shop.example`), or an IP address (IPv6 without
// brackets). Cooldowns are keyed by it, so `https://shop.example/`, `shop.example:443` and
// `Shop.Example` must not each get their own: case and a trailing dot are canonicalized, a URL
// or a port is refused with the host name the caller meant. Pure.
import { isIP } from 'node:net';

export const MAX_TARGET_LENGTH = 253;

export type TargetName = { ok: true; target: string } | { ok: false; message: string };

// A label: letters, digits, '-' and '_' (some sites' keys have one), 1 to 63 of them.
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
const PRINTABLE = /^[\x21-\x7e]+$/;

/** The canonical target of `value`, or why it is not one (a sentence naming `target`). */
export function targetName(value: string): TargetName {
  const text = value.trim().toLowerCase();
  if (text.length === 0 || text.length > MAX_TARGET_LENGTH || !PRINTABLE.test(text)) {
    return {
      ok: false,
      message: `target must be 1 to ${MAX_TARGET_LENGTH} printable characters without spaces: a host name such as shop.example`,
    };
  }
  const bracketed = /^\[([0-9a-f:.]+)\]$/.exec(text);
  if (bracketed && isIP(bracketed[1]) === 6) return { ok: true, target: bracketed[1] };
  if (isIP(text) !== 0) return { ok: true, target: text };
  const meant = hostIn(text);
  if (/^[a-z][a-z0-9+.-]*:\/\//.test(text)) {
    return {
      ok: false,
      message: `target must be a host name, not a URL: send '${meant}', not '${value.trim()}'`,
    };
  }
  if (/[/?#@]/.test(text)) {
    return {
      ok: false,
      message: `target must be a host name, without a path or credentials: send '${meant}'`,
    };
  }
  if (/:\d*$/.test(text)) {
    return { ok: false, message: `target must be a host name, without a port: send '${meant}'` };
  }
  const host = text.endsWith('.') ? text.slice(0, -1) : text;
  if (host.split('.').every((label) => LABEL.test(label))) return { ok: true, target: host };
  return {
    ok: false,
    message: `target must be a host name (letters, digits, '-' and '_' in dot-separated labels), got '${value.trim()}'`,
  };
}

/** The host name a URL or `host:port` names, for the message (best effort). */
function hostIn(text: string): string {
  try {
    const url = new URL(/^[a-z][a-z0-9+.-]*:\/\//.test(text) ? text : `http://${text}`);
    return url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '');
  } catch {
    return text.replace(/^[a-z][a-z0-9+.-]*:\/\//, '').split(/[/:?#]/)[0];
  }
}
