// Tenant B as a process of its own (tenant-b-process.ts starts it): a team's attacking client
// runs on its own machine, so its CPU must not be charged to tenant A's event loop as one
// process would. Protocol: the config as JSON in argv[2]; lines on stdout starting with
// TENANT_B_PREFIX are messages (TenantBMessage, JSON); "stop" on stdin ends the attacks
// (once their minimums are sent).
import { createInterface } from 'node:readline';
import { TENANT_B_PREFIX, type TenantBConfig, type TenantBMessage } from './tenant-b-process.js';
import { attackAsTenantB } from './tenants-world.js';

const send = (message: TenantBMessage) =>
  process.stdout.write(`${TENANT_B_PREFIX}${JSON.stringify(message)}\n`);

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as TenantBConfig;
  let stop = false;
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line.trim() === 'stop') stop = true;
  });
  lines.on('close', () => (stop = true)); // the parent went away: stop, do not attack forever
  const figures = await attackAsTenantB({
    ...config,
    stop: () => stop,
    onAttacking: () => send({ attacking: true }),
  });
  lines.close();
  send({ figures });
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    send({ error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    process.exit(1);
  },
);
