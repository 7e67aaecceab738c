// The named tokens the book's owners are (the discovery API's bearer tokens, the gateway's
// proxy passwords): parsed from a tokens file (one `name: token` a line), looked up by what a
// client presents, and replaced whole when the file changes, so one team's token is revoked by
// deleting its line. A name is what both doors know a client by (lease owner, rate-limit
// bucket, metric label); a token is never logged or echoed.
import { hash } from 'node:crypto';
import { ANONYMOUS_OWNER, OWNER_NAME_PATTERN } from './lease-owner.js';
import { OPEN_POLICY, parseTokenOptions, type TokenPolicy } from './token-scope.js';

/** Shorter tokens are guessable; `openssl rand -hex 24` gives 48 characters. */
export const MIN_TOKEN_LENGTH = 16;
const TOKEN_PATTERN = /^[\x21-\x7e]+$/;

export class TokensFileError extends Error {}

/** A tokens file's content: name -> token, and name -> policy for the lines that set one. */
export interface TokensFileContent {
  tokens: Map<string, string>;
  policies: Map<string, TokenPolicy>;
}

/**
 * Reads a tokens file: `<name>: <token> [options]` per line (options: token-scope.ts), blank
 * lines and `#` comments ignored. A file without a token line is valid here (a reload of an
 * emptied file revokes every token); start-up refuses it (parseTokensFile). Throws naming the
 * line and what is wrong with it, never the token itself.
 */
export function readTokensFile(text: string, source: string): TokensFileContent {
  const tokens = new Map<string, string>();
  const names = new Map<string, string>();
  const policies = new Map<string, TokenPolicy>();
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const where = `${source}:${index + 1}`;
    const colon = line.indexOf(':');
    if (colon < 0) throw new TokensFileError(`${where}: expected "<name>: <token>"`);
    const name = line.slice(0, colon).trim();
    const [token = '', ...options] = line
      .slice(colon + 1)
      .trim()
      .split(/[ \t]+/);
    if (!OWNER_NAME_PATTERN.test(name) || name === ANONYMOUS_OWNER)
      throw new TokensFileError(
        `${where}: name "${name.slice(0, 63)}" must be 1-63 lower-case letters, digits or '-' (not "${ANONYMOUS_OWNER}")`,
      );
    if (names.has(name)) throw new TokensFileError(`${where}: name "${name}" is given twice`);
    if (token.length < MIN_TOKEN_LENGTH || !TOKEN_PATTERN.test(token))
      throw new TokensFileError(
        `${where}: the token of "${name}" must be at least ${MIN_TOKEN_LENGTH} printable characters without spaces`,
      );
    if (tokens.has(token))
      throw new TokensFileError(`${where}: the token of "${name}" is also "${tokens.get(token)}"'s`);
    if (options.length > 0) {
      try {
        policies.set(name, parseTokenOptions(options));
      } catch (err) {
        throw new TokensFileError(`${where}: the options of "${name}": ${(err as Error).message}`);
      }
    }
    tokens.set(token, name);
    names.set(name, token);
  });
  return { tokens: names, policies };
}

/** Parses a tokens file for start-up: as readTokensFile, and it must hold a token. */
export function parseTokensFile(text: string, source: string): Map<string, string> {
  return parseTokensFileContent(text, source).tokens;
}

/** readTokensFile that refuses a file without a token (start-up: nothing could call the API). */
export function parseTokensFileContent(text: string, source: string): TokensFileContent {
  const content = readTokensFile(text, source);
  if (content.tokens.size === 0)
    throw new TokensFileError(`${source}: holds no token ("<name>: <token>" lines)`);
  return content;
}

/** The live set of tokens; replace() swaps it whole (a reload of the file). */
export class ApiTokens {
  private byDigest = new Map<string, string>();
  private policies: ReadonlyMap<string, TokenPolicy> = new Map();

  constructor(tokens: ReadonlyMap<string, string>, policies: ReadonlyMap<string, TokenPolicy> = new Map()) {
    this.replace(tokens, policies);
  }

  /** One token under a name (DISCOVERY_TOKEN, tests). */
  static single(token: string, name = 'default'): ApiTokens {
    return new ApiTokens(new Map([[name, token]]));
  }

  /** Swaps the set whole; an empty set revokes every token (every request answers 401). */
  replace(tokens: ReadonlyMap<string, string>, policies: ReadonlyMap<string, TokenPolicy> = new Map()): void {
    const next = new Map<string, string>();
    for (const [name, token] of tokens) next.set(tokenDigest(token), name);
    this.byDigest = next;
    this.policies = policies;
  }

  /** A name's scope and trust (token-scope.ts); a line without options: every proxy, untrusted. */
  policyOf(name: string): TokenPolicy {
    return this.policies.get(name) ?? OPEN_POLICY;
  }

  /** The names trusted alone for rotation on bans. */
  get rotationTrusted(): string[] {
    return [...this.policies].filter(([, p]) => p.rotationTrusted).map(([n]) => n);
  }

  get names(): string[] {
    return [...this.byDigest.values()].sort();
  }

  /**
   * The name of the token whose digest this is. A Map lookup by digest: its timing depends on
   * the digest of what the client sent, which tells nothing about any token's bytes.
   */
  nameOf(digest: string): string | undefined {
    return this.byDigest.get(digest);
  }
}

export function tokenDigest(token: string): string {
  return hash('sha256', token, 'base64');
}
