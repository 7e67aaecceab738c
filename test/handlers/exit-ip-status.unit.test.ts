import { exitIPUpdate, servedAfter, type ServedBy } from '../../handlers/exit-ip-status.js';
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
/** What serves the proxy is what status says: no move. */
const SAME: ServedBy = { providerID: undefined, ip: undefined };

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
    expect(exitIPUpdate(proxy(exitIPURL, stored), SAME, observed)).toEqual(expected);
  });

  it('a proxy being deleted is left alone', () => {
    expect(exitIPUpdate(proxy(URL, '10.0.0.1', true), SAME, '10.0.0.2')).toBeUndefined();
  });
});

describe('exitIPUpdate: the exit IP follows the instance (issue 44 item 4)', () => {
  /** A Managed proxy on instance i-1 at 10.0.0.7 whose exit IP was read as 203.0.113.9. */
  const onI1 = (exitIP: string | undefined) =>
    stateMachineProxy({
      spec: { healthCheck: { ...healthCheck, exitIPURL: URL } },
      status: { phase: 'Ready', providerID: 'i-1', ip: '10.0.0.7', ...(exitIP ? { exitIP } : {}) },
    });
  it.each<[string, ServedBy, string | undefined, ReturnType<typeof exitIPUpdate>]>([
    [
      'same instance, same address, nothing new: nothing',
      { providerID: 'i-1', ip: '10.0.0.7' },
      undefined,
      undefined,
    ],
    [
      'the instance deleted and forgotten: cleared until read through the next one',
      { providerID: null, ip: null },
      undefined,
      {
        exitIP: null,
        event: {
          reason: 'ExitIPCleared',
          message: 'exit IP 203.0.113.9 cleared: the proxy moved to no instance; it is read again through it',
        },
      },
    ],
    [
      'a new instance at the same address: cleared (its exit IP may differ)',
      { providerID: 'i-2', ip: '10.0.0.7' },
      undefined,
      {
        exitIP: null,
        event: {
          reason: 'ExitIPCleared',
          message:
            'exit IP 203.0.113.9 cleared: the proxy moved to instance i-2; it is read again through it',
        },
      },
    ],
    [
      'the same instance at a new address: cleared',
      { providerID: 'i-1', ip: '10.0.0.8' },
      undefined,
      expect.objectContaining({ exitIP: null }),
    ],
    [
      'a new instance already read through: its own exit IP at once',
      { providerID: 'i-2', ip: '10.0.0.9' },
      '198.51.100.4',
      {
        exitIP: '198.51.100.4',
        event: {
          reason: 'ExitIPChanged',
          message: 'exit IP changed from 203.0.113.9 to 198.51.100.4 (instance i-2)',
        },
      },
    ],
  ])('%s', (_what, now, observed, expected) => {
    expect(exitIPUpdate(onI1('203.0.113.9'), now, observed)).toEqual(expected);
  });

  it('nothing stored and a move: nothing to clear, the new read is written when it comes', () => {
    expect(exitIPUpdate(onI1(undefined), { providerID: 'i-2', ip: '10.0.0.7' }, undefined)).toBeUndefined();
  });
});

describe('servedAfter: what serves the proxy once the step is written', () => {
  const onI1 = stateMachineProxy({ status: { phase: 'Ready', providerID: 'i-1', ip: '10.0.0.7' } });
  it.each<[string, Parameters<typeof servedAfter>[1], { providerID?: string }, ServedBy]>([
    ['no status in the step: what is stored', undefined, {}, { providerID: 'i-1', ip: '10.0.0.7' }],
    ['a status that leaves both alone: what is stored', {}, {}, { providerID: 'i-1', ip: '10.0.0.7' }],
    [
      'the step forgets the instance (null)',
      { providerID: null, ip: null },
      {},
      { providerID: null, ip: null },
    ],
    ['the step names a new address', { ip: '10.0.0.8' }, {}, { providerID: 'i-1', ip: '10.0.0.8' }],
    [
      'a create returned a providerID: it wins over the step',
      { providerID: null, ip: null },
      { providerID: 'i-2' },
      { providerID: 'i-2', ip: null },
    ],
    [
      'a create with no status in the step',
      undefined,
      { providerID: 'i-2' },
      { providerID: 'i-2', ip: '10.0.0.7' },
    ],
  ])('%s', (_what, status, override, want) => {
    expect(servedAfter(onI1, status, override)).toEqual(want);
  });
});
