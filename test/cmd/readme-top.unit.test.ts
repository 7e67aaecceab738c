// Issue 12 items 8 and 9: what the README states up front and in the quickstart stays true
// of the code: the stack substitution, the `kubectl get px` columns, the network policy label.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PROXY_CLIENT_LABEL, SQUID_NETWORK_POLICY_NAME } from '../../charts/network-policy-chart.js';
import { proxyCrd } from '../../crds/proxy-crd.js';

const README = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
const top = README.slice(0, README.indexOf('\n## '));

describe('the README', () => {
  it('says near the top that the Go stack was replaced, and by what', () => {
    expect(top).toMatch(/What replaced what/);
    for (const word of ['Go', 'TypeScript', 'Node.js 24', 'cdk8s', 'tsyringe', 'express', 'jest'])
      expect(top).toContain(word);
  });

  it("shows `kubectl get px` with the CRD's printer columns", () => {
    const columns = [
      'NAME',
      ...proxyCrd.spec.versions[0]
        .additionalPrinterColumns!.filter((c) => !c.priority)
        .map((c) => c.name.toUpperCase()),
    ];
    const headers = README.split('\n').filter((l) => /^(# )?NAME\s+MODE\b/.test(l));
    expect(headers.length).toBeGreaterThanOrEqual(2);
    for (const h of headers) expect(h.replace(/^# /, '').trim().split(/\s+/)).toEqual(columns);
  });

  it('says the mock sample has no routable IP on kind', () => {
    expect(README).toMatch(/the `mock` sample has no routable IP/);
  });

  it('documents the network policy and the namespace label clients need', () => {
    expect(README).toContain(SQUID_NETWORK_POLICY_NAME);
    expect(README).toContain(`kubectl label namespace <ns> ${PROXY_CLIENT_LABEL}=true`);
  });
});
