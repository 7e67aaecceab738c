// A proxy that died as a black hole: its address accepts nothing and answers nothing. Node
// accepts every connection itself, so a Python process holds each address: a socket that
// listens with a backlog of 0 and never accepts, its accept queue filled by its own idle
// connections, so that the kernel drops every later SYN (a connect then times out, as to a
// machine that vanished). Loopback only.
import { spawn, type ChildProcess } from 'node:child_process';

const PROGRAM = `
import socket, sys, time
held = []
for address in sys.argv[1:]:
    host, port = address.rsplit(':', 1)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(0)
    held.append(s)
    for _ in range(3):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect((host, int(port)))
        except BlockingIOError:
            pass
        held.append(c)
time.sleep(0.3)
print('ready', flush=True)
time.sleep(3600)
`;

export interface BlackHoles {
  close(): void;
}

/** Holds each `host:port` (freed by a proxy that just closed) as a black hole until closed. */
export async function blackHoles(addresses: string[]): Promise<BlackHoles> {
  const child: ChildProcess = spawn('python3', ['-c', PROGRAM, ...addresses], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`black hole exited (${code}): ${stderr}`)));
  });
  return { close: () => void child.kill() };
}
