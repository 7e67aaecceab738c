// What a proxy host may be: one spelling for one address. The CRD states the rule in CEL
// (proxy-spec-schema.ts builds it from the patterns below) and the operator checks it again
// in TypeScript before it probes a host or hands it out, for objects stored before the rule
// and for addresses a provider reports. URL parsers read numeric forms such as 0177.0.0.1,
// 0x7f.1, 127.1 or 2130706433 as IPv4 addresses (here all 127.0.0.1), so a name-shaped host
// that ends in a numeric label would be probed at one address and handed out as another.

/** A DNS subdomain whose labels are 1-63 lower-case letters, digits or '-'. */
export const HOST_NAME_PATTERN =
  '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$';
/**
 * A last label a URL parser takes for an IPv4 number (WHATWG "ends in a number": decimal,
 * or 0x-prefixed hexadecimal, "0x" alone included).
 */
export const NUMERIC_LAST_LABEL_PATTERN = '(^|\\.)([0-9]+|0x[0-9a-f]*)$';

// Probe URLs, as RE2 patterns over the whole URL: scheme, "://", then the authority
// ([userinfo@]host[:port]) up to the first '/', '?' or '#'.
const AUTHORITY_START = '^[^:/?#]+://';
const USERINFO = '([^@/?#]*@)?';
const AUTHORITY_END = '(:[0-9]*)?([/?#]|$)';
const OCTET = '(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])';
/** A URL with an explicit, non-empty port (the last ':' of the authority, digits, its end). */
export const URL_HAS_PORT = `${AUTHORITY_START}[^/?#]*:[0-9]+([/?#]|$)`;
/** ... whose port is 1-65535 written without leading zeros. */
export const URL_GOOD_PORT = `${AUTHORITY_START}[^/?#]*:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])([/?#]|$)`;
/** A '%' inside the brackets of an IPv6 host: a zone id, which no WHATWG URL can carry. */
export const URL_ZONE = `${AUTHORITY_START}[^/?#]*\\[[^\\]/?#]*%`;
/** '<' or '>' in the authority: Go's parser takes them in a host, a WHATWG parser refuses the URL. */
export const URL_ANGLE_BRACKET = `${AUTHORITY_START}[^/?#]*[<>]`;
/** A host whose last label (a trailing dot aside) a URL parser takes for an IPv4 number; case-blind like URL hosts. */
export const URL_NUMERIC_HOST = `(?i)${AUTHORITY_START}${USERINFO}([^:/?#@\\[\\]]*\\.)?([0-9]+|0x[0-9a-f]*)\\.?${AUTHORITY_END}`;
/** A host in canonical dotted decimal. */
export const URL_IPV4_HOST = `${AUTHORITY_START}${USERINFO}${OCTET}(\\.${OCTET}){3}${AUTHORITY_END}`;

/** The CEL rule over a host string (`self`): the same decision as `isProxyHost`. */
export const HOST_CEL_RULE = `isIP(self) || (self.matches(r'${HOST_NAME_PATTERN}') && !self.matches(r'${NUMERIC_LAST_LABEL_PATTERN}'))`;

export const HOST_RULE_TEXT =
  'an IPv4 address in dotted decimal without leading zeros (e.g. 203.0.113.7), an IPv6 address ' +
  'without brackets or zone, or a lower-case DNS name whose labels are at most 63 characters and ' +
  'whose last label is not a number';

const HOST_NAME = new RegExp(HOST_NAME_PATTERN);
const NUMERIC_LAST_LABEL = new RegExp(NUMERIC_LAST_LABEL_PATTERN);
const IPV4 = /^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/** Canonical dotted-decimal IPv4, as Go's netip.ParseAddr accepts it (no leading zeros, octets ≤ 255). */
function ipv4Bytes(s: string): number[] | undefined {
  const m = IPV4.exec(s);
  if (!m) return undefined;
  const bytes = m.slice(1, 5).map(Number);
  return bytes.every((b) => b <= 255) ? bytes : undefined;
}

/** Groups of an IPv6 half ("" → none); an embedded IPv4 tail counts as two groups. */
function groupsOf(half: string, last: boolean): number[] | undefined {
  if (half === '') return [];
  const parts = half.split(':');
  const groups: number[] = [];
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    if (last && i === parts.length - 1 && part.includes('.')) {
      const v4 = ipv4Bytes(part);
      if (!v4) return undefined;
      groups.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
    } else if (HEX_GROUP.test(part)) groups.push(parseInt(part, 16));
    else return undefined;
  }
  return groups;
}

/** The 8 groups of an IPv6 address without zone, as Go's netip.ParseAddr reads it, or undefined. */
function ipv6Groups(s: string): number[] | undefined {
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  if (halves.length === 1) {
    const groups = groupsOf(s, true);
    return groups?.length === 8 ? groups : undefined;
  }
  const head = groupsOf(halves[0], false);
  const tail = groupsOf(halves[1], true);
  // "::" stands for at least one zero group.
  if (!head || !tail || head.length + tail.length > 7) return undefined;
  return [...head, ...Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/** Kubernetes' CEL isIP(): netip.ParseAddr, without a zone and not an IPv4-mapped IPv6 address. */
export function isIP(s: string): boolean {
  if (ipv4Bytes(s)) return true;
  const g = ipv6Groups(s);
  if (!g) return false;
  const mapped = g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff;
  return !mapped;
}

/** Whether `host` names exactly one address: the CEL rule of spec.endpoint.host, in TypeScript. */
export function isProxyHost(host: string): boolean {
  if (isIP(host)) return true;
  return host.length <= 253 && HOST_NAME.test(host) && !NUMERIC_LAST_LABEL.test(host);
}

/** RE2's leading (?i) as a JavaScript flag; the rest of these patterns' syntax is common to both. */
function jsRegExp(pattern: string): RegExp {
  return pattern.startsWith('(?i)') ? new RegExp(pattern.slice(4), 'i') : new RegExp(pattern);
}
const NUMERIC_URL_HOST = jsRegExp(URL_NUMERIC_HOST);
const IPV4_URL_HOST = jsRegExp(URL_IPV4_HOST);

/** Whether a probe URL's host, as written, is read as itself: the CRD's numeric-host rule in TypeScript. */
export function probeURLHostIsLiteral(url: string): boolean {
  return !NUMERIC_URL_HOST.test(url) || IPV4_URL_HOST.test(url);
}
