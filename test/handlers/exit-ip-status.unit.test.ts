import { exitIPUpdate } from '../../handlers/exit-ip-status.js';
import { stateMachineProxy } from './state-machine-proxy.js';

const healthCheck = {
  probeURL: 'http://127.0.0.1/x',
  intervalSeconds: 30,
  timeoutSeconds: 5,
  failureThreshold: 3,
  successThreshold: 1,
  expectedStatusCodes: [204],
};

function proxy(exitIPURL: string | undefined, stored: string | undefined, deleting = false) {
  const p = stateMachineProxy({
    spec: { healthCheck: { ...healthCheck, ...(exitIPURL ? { exitIPURL } : {}) } },
    status: { phase: 'Ready', ...(stored ? { exitIP: stored } : {}) },
  });
  if (deleting) p.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
  return p;
}

const URL = 'http://echo.example/ip';

describe('exitIPUpdate: status.exitIP is written only when it changes', () => {
  it.each([
    ['nothing read yet', URL, undefined, undefined, undefined],
    ['nothing read, one stored (a failed read keeps it)', URL, '10.0.0.1', undefined, undefined],
    ['the stored one read again', URL, '10.0.0.1', '10.0.0.1', undefined],
    [
      'a first read',
      URL,
      undefined,
      '10.0.0.1',
      {
        exitIP: '10.0.0.1',
        event: { reason: 'ExitIPChanged', message: 'exit IP is 10.0.0.1 (first read through the proxy)' },
      },
    ],
    [
      'a new one',
      URL,
      '10.0.0.1',
      '10.0.0.2',
      {
        exitIP: '10.0.0.2',
        event: { reason: 'ExitIPChanged', message: 'exit IP changed from 10.0.0.1 to 10.0.0.2' },
      },
    ],
    ['exitIPURL removed: the stored one goes, quietly', undefined, '10.0.0.1', '10.0.0.2', { exitIP: null }],
    ['exitIPURL unset, nothing stored', undefined, undefined, '10.0.0.2', undefined],
  ])('%s', (_what, exitIPURL, stored, observed, expected) => {
    expect(exitIPUpdate(proxy(exitIPURL, stored), observed)).toEqual(expected);
  });

  it('a proxy being deleted is left alone', () => {
    expect(exitIPUpdate(proxy(URL, '10.0.0.1', true), '10.0.0.2')).toBeUndefined();
  });
});
