// Attribute selectors: the one matching rule shared by listing and leasing.

export type AttributeMatcher = (attributes: Record<string, string>) => boolean;

/**
 * Compiles a selector once for a scan over the whole catalog (listing and leasing both test
 * every proxy): true when every selector key is present with exactly the same value.
 */
export function selectorMatcher(selector: Record<string, string>): AttributeMatcher {
  const entries = Object.entries(selector);
  if (entries.length === 0) return () => true;
  return (attributes) => {
    for (const [key, value] of entries) {
      // Own-property check: a selector key like "toString" must not match Object.prototype.
      if (!Object.hasOwn(attributes, key) || attributes[key] !== value) return false;
    }
    return true;
  };
}

export function matchesSelector(
  attributes: Record<string, string>,
  selector: Record<string, string>,
): boolean {
  return selectorMatcher(selector)(attributes);
}
