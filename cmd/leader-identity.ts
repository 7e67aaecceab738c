// The leader-election identity of this process. client-go's rule: the host name plus a
// random suffix, so two processes on one host (or one Pod restarted in place before its old
// Lease expired) never take each other for the holder. POD_NAME, when set, is the prefix:
// `kubectl get lease` still names the Pod.
import { randomBytes } from 'node:crypto';

export function leaderIdentity(
  podName: string | undefined,
  hostname: string,
  suffix: string = randomBytes(6).toString('hex'),
): string {
  const prefix = podName !== undefined && podName !== '' ? podName : hostname;
  return `${prefix}_${suffix}`;
}
