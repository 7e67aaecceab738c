import {
  leaderElectionErrorReason,
  type LeaderElectionErrorReason,
} from '../../framework/core/leader-election.js';
import { KubeApiError } from '../../framework/utils/kube-client.js';

const status = (code: number) => new KubeApiError(`PUT /lease: ${code}`, code);
const named = (name: string) => Object.assign(new Error(name), { name });

describe('a failed leader-election attempt is classified', () => {
  it.each<[string, unknown, LeaderElectionErrorReason | undefined]>([
    ["404: the Lease's namespace does not exist", status(404), 'NamespaceNotFound'],
    ['403: RBAC forbids the Lease', status(403), 'Forbidden'],
    ['401: the credentials are refused', status(401), 'Unauthorized'],
    ['500: the API server failed', status(500), 'ApiError'],
    ['a request deadline', named('TimeoutError'), 'Timeout'],
    ['an aborted request', named('AbortError'), 'Timeout'],
    [
      'a refused connection',
      Object.assign(new Error('fetch failed'), { code: 'ECONNREFUSED' }),
      'Unreachable',
    ],
    ['409: another candidate wrote first (contention, not an error)', status(409), undefined],
  ])('%s → %s', (_what, err, reason) => {
    expect(leaderElectionErrorReason(err)).toBe(reason);
  });
});
