// The guard every test file runs under (jest.config.js's testEnvironment): a file that leaves a
// TCP server listening in the jest process fails, whether the server is ref'd (it would keep
// jest from exiting) or unref'd (crawlee's open proxy on [::] was); a file that closes its
// servers passes.
import { createServer, type Server } from 'node:net';
import LeakGuardEnvironment from './leak-guard-environment.js';

type Config = ConstructorParameters<typeof LeakGuardEnvironment>[0];

function environment(): LeakGuardEnvironment {
  const config = {
    globalConfig: {},
    projectConfig: { testEnvironmentOptions: {}, globals: {}, setupFiles: [] },
  } as unknown as Config;
  return new LeakGuardEnvironment(config, {
    testPath: '/a/leaky.unit.test.ts',
    console,
    docblockPragmas: {},
  });
}

async function listening(host: string): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return server;
}

const close = (server: Server) => new Promise((resolve) => server.close(resolve));

describe('the leak guard environment', () => {
  it.each([
    ['a ref’d server', false],
    ['an unref’d server (seen in /proc only)', true],
  ])('fails a file that leaves %s listening, naming its address', async (_what, unref) => {
    const env = environment();
    await env.setup();
    const server = await listening('127.0.0.1');
    if (unref) server.unref();
    const port = (server.address() as { port: number }).port;
    try {
      await expect(env.teardown()).rejects.toThrow(
        new RegExp(`/a/leaky.unit.test.ts left TCP listeners open[\\s\\S]*127\\.0\\.0\\.1:${port}`),
      );
    } finally {
      await close(server);
    }
  });

  it('passes a file that closed its servers, and one whose server was there before it', async () => {
    const before = await listening('127.0.0.1');
    try {
      const env = environment();
      await env.setup();
      const server = await listening('127.0.0.1');
      await close(server);
      await expect(env.teardown()).resolves.toBeUndefined();
    } finally {
      await close(before);
    }
  });

  it('waits for a close() that afterAll did not await', async () => {
    const env = environment();
    await env.setup();
    const server = await listening('127.0.0.1');
    setTimeout(() => server.close(), 300);
    await expect(env.teardown()).resolves.toBeUndefined();
  });
});
