// Which lease each (session, host) uses (client/src/crawlee/bindings.ts).
import { Bindings, slotOf } from '../../client/src/crawlee/bindings.js';

describe('the bindings of sessions to leases, per host', () => {
  it('finds what a session is bound to for a host, and nothing for another host or session', () => {
    const bindings = new Bindings<string>();
    bindings.set('s1', 'one.example', 'lease-1');
    expect(bindings.get('s1', 'one.example')).toBe('lease-1');
    expect(bindings.get('s1', 'two.example')).toBeUndefined();
    expect(bindings.get('s2', 'one.example')).toBeUndefined();
  });

  it.each([
    ['no session', undefined, 'one.example'],
    ['no host', 's1', undefined],
    ['neither', undefined, undefined],
  ] as const)('binds a request with %s as it binds any other', (_, session, host) => {
    const bindings = new Bindings<string>();
    bindings.set(session, host, 'lease');
    expect(bindings.get(session, host)).toBe('lease');
    bindings.deleteIf(session, host, 'lease');
    expect(bindings.get(session, host)).toBeUndefined();
  });

  it("treats no session as the empty session, as the server's session keys do", () => {
    expect(slotOf(undefined)).toBe('');
    const bindings = new Bindings<string>();
    bindings.set(undefined, 'one.example', 'lease');
    expect(bindings.get('', 'one.example')).toBe('lease');
  });

  it('unbinds only from the lease named: a session bound again since keeps its new lease', () => {
    const bindings = new Bindings<string>();
    bindings.set('s1', 'one.example', 'old');
    bindings.set('s1', 'one.example', 'new');
    bindings.deleteIf('s1', 'one.example', 'old');
    expect(bindings.get('s1', 'one.example')).toBe('new');
    bindings.deleteIf('s1', 'one.example', 'new');
    expect(bindings.get('s1', 'one.example')).toBeUndefined();
  });

  it("lists a session's leases over every host, and no other session's", () => {
    const bindings = new Bindings<string>();
    bindings.set('s1', 'one.example', 'a');
    bindings.set('s1', 'two.example', 'b');
    bindings.set('s2', 'one.example', 'c');
    expect(bindings.ofSession('s1').sort()).toEqual(['a', 'b']);
    expect(bindings.ofSession('s3')).toEqual([]);
  });
});
