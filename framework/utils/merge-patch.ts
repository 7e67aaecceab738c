import { isDeepStrictEqual } from 'node:util';

type Json = unknown;

function isObject(v: Json): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 7386 JSON merge patch; `target` is not modified (the result may share parts of both). */
export function applyMergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return patch;
  const out: Record<string, Json> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = applyMergePatch(out[k], v);
  }
  return out;
}

/** True when applying `patch` to `target` would change nothing. */
export function mergePatchIsNoop(target: Json, patch: Json): boolean {
  return isDeepStrictEqual(applyMergePatch(target, patch), target ?? {});
}
