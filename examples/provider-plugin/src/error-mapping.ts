import type { ProviderErrorKind } from 'proxy-operator/plugin';

/**
 * File-system errors → the operator's four kinds: a full disk is a quota, a forbidden or
 * misconfigured path cannot heal by retrying, anything else (EMFILE, EIO, EBUSY…) might.
 */
export function classifyFsError(err: unknown): ProviderErrorKind {
  switch ((err as NodeJS.ErrnoException | undefined)?.code) {
    case 'ENOENT':
      return 'NotFound';
    case 'ENOSPC':
    case 'EDQUOT':
      return 'QuotaExceeded';
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
    case 'ENOTDIR':
    case 'EISDIR':
      return 'Permanent';
    default:
      return 'Transient';
  }
}
