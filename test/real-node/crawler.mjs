// A crawler Pod of the real-node run (plain Node, no dependencies): it uses the discovery
// API through its Service and fetches through the leased Squid Pod, as the README shows.
// Prints one JSON line per event and a final {"result": ...} line; exits 1 on a failure.
//
//   node crawler.mjs quickstart         list, lease, fetch through the proxy, report, release
//   node crawler.mjs lease-loop SECONDS hold maxLeases-1 leases, cycle one more, probe the limit
//   node crawler.mjs gateway            fetch through the gateway's Service with only a proxy URL
//
// Environment: DISCOVERY (http://<ClusterIP>:8090), TARGET (the in-cluster target's Pod
// address, which the providers config allows), INSIDE (space-separated URLs inside the
// cluster the Squid Pod must refuse), PROXY (namespace/name of the kubernetes Proxy), MAX_LEASES,
// DISCOVERY_TOKEN (the bearer token: the API is closed by default); for gateway: GATEWAY
// (host:port of its Service), EXIT_IP (the kubernetes Proxy's Pod IP: the target echoes the
// address each request came from as x-peer), POD_IP (this Pod's own).
/* global console, fetch, AbortSignal, setTimeout, Buffer */
import http from 'node:http';
import process from 'node:process';
import { URL } from 'node:url';

const discovery = process.env.DISCOVERY;
const auth = process.env.DISCOVERY_TOKEN ? { authorization: `Bearer ${process.env.DISCOVERY_TOKEN}` } : {};
const target = process.env.TARGET;
const proxyID = process.env.PROXY;
const say = (event) => console.log(JSON.stringify({ at: new Date().toISOString(), ...event }));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function api(method, path, body) {
  // As a client must: a 503 store_unavailable (the shared book's Redis still connecting) is
  // retried after its Retry-After, for a few seconds.
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(`${discovery}${path}`, {
      method,
      headers: body ? { ...auth, 'content-type': 'application/json' } : auth,
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(5000),
    });
    const text = await res.text();
    const answer = { status: res.status, body: text ? JSON.parse(text) : undefined };
    if (res.status !== 503 || attempt >= 10) return answer;
    say({ retry: `${method} ${path}`, status: 503, error: answer.body?.error });
    await sleep(Number(res.headers.get('retry-after') ?? 1) * 1000);
  }
}

/**
 * GET `url` through an HTTP forward proxy (absolute-form request line), with the credentials
 * of the proxy URL's userinfo as Proxy-Authorization (the lease's `proxy.url` carries them).
 */
function fetchVia(proxyURL, url, timeoutMs = 5000) {
  const proxy = new URL(proxyURL);
  const headers = { host: new URL(url).host };
  if (proxy.username !== '') {
    const userinfo = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
    headers['proxy-authorization'] = `Basic ${Buffer.from(userinfo).toString('base64')}`;
  }
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: proxy.hostname, port: Number(proxy.port), path: url, headers },
      (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

function expect(ok, what, detail) {
  if (!ok) {
    say({ result: 'failed', what, detail });
    process.exit(1);
  }
  say({ ok: what });
}

async function quickstart() {
  // Closed by default: the same list without the token is refused.
  const anonymous = await fetch(`${discovery}/v1/proxies`, { signal: AbortSignal.timeout(5000) });
  expect(anonymous.status === 401, 'a list without the token answers 401', { status: anonymous.status });
  const list = await api('GET', '/v1/proxies?healthy=true');
  expect(list.status === 200, 'list healthy proxies', list);
  const ids = list.body.items.map((p) => p.id);
  expect(ids.includes(proxyID), `the kubernetes Proxy ${proxyID} is listed healthy`, ids);
  const lease = await api('POST', '/v1/leases', {
    selector: { run: 'real-node' },
    ttlSeconds: 300,
    target: 'target.local',
  });
  expect(lease.status === 201, 'lease', lease);
  const { leaseID, proxy } = lease.body;
  expect(proxy.id === proxyID, 'the lease names the kubernetes Proxy', proxy);
  const fetched = await fetchVia(proxy.url, target);
  expect(
    fetched.status === 200 && fetched.body.includes('hello from the in-cluster target'),
    `fetch ${target} through the leased Squid Pod ${proxy.ip}:${proxy.port}, with the lease's credentials`,
    fetched,
  );
  // Closed by default: the Squid Pod wants its credentials...
  const anonymousFetch = await fetchVia(`http://${proxy.ip}:${proxy.port}`, target);
  expect(anonymousFetch.status === 407, 'the same fetch without the credentials answers 407', anonymousFetch);
  // ...and refuses every destination inside (the Service of that same target, the discovery
  // Service, the metadata address) that the providers config does not allow explicitly.
  // A name is resolved by Squid before its dst rules match: a lost DNS datagram costs Squid's
  // 5 s retransmit, so the wait outlasts Squid's own dns_timeout (30 s) and the time is shown.
  for (const inside of (process.env.INSIDE ?? '').split(' ').filter(Boolean)) {
    const started = Date.now();
    const refused = await fetchVia(proxy.url, inside, 35_000).catch((err) => ({
      status: 0,
      body: String(err),
    }));
    expect(refused.status === 403, `the leased Squid Pod refuses ${inside} (inside the cluster)`, {
      status: refused.status,
      ms: Date.now() - started,
      body: refused.body.slice(0, 200),
    });
    if (Date.now() - started > 1000) say({ slow: inside, ms: Date.now() - started });
  }
  const report = await api('POST', `/v1/leases/${leaseID}/report`, { result: 'ok', target: 'target.local' });
  expect(report.status === 200 && report.body.result === 'ok', 'report', report);
  const first = await api('DELETE', `/v1/leases/${leaseID}`);
  const again = await api('DELETE', `/v1/leases/${leaseID}`);
  // A lease already ended is 404 lease_not_found (issue 44: the same answer as another token's).
  expect(first.status === 204 && again.status === 404, 'release (204, then 404 once ended)', [
    first.status,
    again.status,
  ]);
  say({ result: 'passed' });
}

/**
 * Holds maxLeases-1 leases (renewing them), cycles one more lease (release, then lease
 * again) and, after each cycle, asks for one lease too many. Over a rollout restart of the
 * operator: no renewal may find its lease gone, no cycling lease may get a 409, and the
 * lease too many must always be refused (else the proxy carries more than maxLeases).
 */
async function leaseLoop(seconds) {
  const max = Number(process.env.MAX_LEASES);
  const selector = { run: 'real-node' };
  const ask = () => api('POST', '/v1/leases', { selector, ttlSeconds: 120 });
  const held = [];
  for (let i = 0; i < max - 1; i++) {
    const l = await ask();
    expect(l.status === 201, `holder lease ${i + 1} of ${max - 1}`, l);
    held.push(l.body.leaseID);
  }
  const violations = [];
  let cycles = 0;
  let errors = 0;
  let cycling;
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    try {
      if (cycling) await api('DELETE', `/v1/leases/${cycling}`);
      cycling = undefined;
      const l = await ask();
      if (l.status === 201) cycling = l.body.leaseID;
      else violations.push({ what: 'the cycling lease was refused', status: l.status, body: l.body });
      const extra = await ask();
      if (extra.status === 201) {
        violations.push({ what: `a lease beyond maxLeases (${max}) was granted`, lease: extra.body.leaseID });
        await api('DELETE', `/v1/leases/${extra.body.leaseID}`);
      }
      for (const id of held) {
        const r = await api('POST', `/v1/leases/${id}/renew`, {});
        if (r.status !== 200) violations.push({ what: 'a held lease was lost', lease: id, status: r.status });
      }
      cycles++;
    } catch (err) {
      // The Service between two Pods (a connection cut mid-request) is not a lease-book fault.
      errors++;
      say({ transportError: String(err) });
    }
    await sleep(250);
  }
  for (const id of [...held, cycling].filter(Boolean))
    await api('DELETE', `/v1/leases/${id}`).catch(() => undefined);
  const byKind = {};
  for (const v of violations) byKind[v.what] = (byKind[v.what] ?? 0) + 1;
  const summary = {
    cycles,
    transportErrors: errors,
    violations: violations.length,
    byKind,
    first: violations.slice(0, 3),
  };
  say({ result: violations.length === 0 && cycles > 0 ? 'passed' : 'failed', ...summary });
  process.exit(violations.length === 0 && cycles > 0 ? 0 : 1);
}

/**
 * Issue 46 item 4: a crawler that knows nothing but a proxy URL. Every fetch goes through the
 * gateway's Service; the target sees it come from the kubernetes Proxy's Squid Pod (the
 * selector names it), never from this Pod; a session keeps its exit; without a token the
 * gateway refuses (never an open proxy).
 */
async function gateway() {
  const gw = process.env.GATEWAY;
  const token = process.env.DISCOVERY_TOKEN;
  const exitIP = process.env.EXIT_IP;
  // The options in the username: a session, and the attribute run=real-node, its '-' written
  // '--' (the grammar's escape, unchanged by a URL's userinfo decoding).
  const url = (user, password) => `http://${user}:${password}@${gw}`;
  const errorOf = (answer) => {
    try {
      return JSON.parse(answer.body).error;
    } catch {
      return undefined;
    }
  };
  const sessionProxy = url('session-rn1-run-real--node', token);
  const anonymous = await fetchVia(`http://${gw}`, target);
  expect(
    anonymous.status === 407 && errorOf(anonymous) === 'proxy_auth_required',
    'the gateway refuses a request without credentials (407 proxy_auth_required)',
    { status: anonymous.status, body: anonymous.body.slice(0, 200) },
  );
  const badToken = await fetchVia(url('session-rn1', 'not-a-token'), target);
  expect(
    badToken.status === 407 && errorOf(badToken) === 'invalid_token',
    'the gateway refuses a wrong token (407 invalid_token)',
    { status: badToken.status, body: badToken.body.slice(0, 200) },
  );
  const peers = [];
  for (let i = 0; i < 3; i++) {
    // The shared book's Redis may still be connecting after a rollout: 503 is retried.
    let fetched;
    for (let attempt = 1; attempt <= 10; attempt++) {
      fetched = await fetchVia(sessionProxy, target, 10_000);
      if (fetched.status !== 503) break;
      say({ retry: 'gateway fetch', status: 503, body: fetched.body.slice(0, 200) });
      await sleep(1000);
    }
    expect(
      fetched.status === 200 && fetched.body.includes('hello from the in-cluster target'),
      `fetch ${target} through the gateway ${gw} (request ${i + 1})`,
      { status: fetched.status, headers: fetched.headers, body: fetched.body.slice(0, 300) },
    );
    peers.push(fetched.headers['x-peer']);
  }
  const peer = peers[0].replace(/^::ffff:/, '');
  expect(
    peer === exitIP && peer !== process.env.POD_IP,
    `the target saw the fleet proxy's address ${exitIP}, not this Pod's ${process.env.POD_IP}`,
    { peers },
  );
  expect(new Set(peers).size === 1, 'the session kept one exit for its three requests', { peers });
  say({ result: 'passed', exit: peer });
}

const [mode, arg] = process.argv.slice(2);
if (mode === 'quickstart') await quickstart();
else if (mode === 'lease-loop') await leaseLoop(Number(arg ?? 60));
else if (mode === 'gateway') await gateway();
else {
  say({ result: 'failed', what: `unknown mode ${mode}` });
  process.exit(2);
}
