// Attribute selectors: the one matching rule shared by listing and leasing.

/** True when every selector key is present in `attributes` with exactly the same value. */
export function matchesSelector(
  attributes: Record<string, string>,
  selector: Record<string, string>,
): boolean {
  for (const [key, value] of Object.entries(selector)) {
    // Own-property check: a selector key like "toString" must not match Object.prototype.
    if (!Object.hasOwn(attributes, key) || attributes[key] !== value) return false;
  }
  return true;
}
