// MONITOR on a raw socket, for tests that count what a script or a client sent. ioredis's
// own monitor() now and then fails with "Command queue state error" (its ready check races
// the MONITOR stream), which made cost tests flaky under load; this reads the stream itself.
import { EventEmitter } from 'node:events';
import { connect } from 'node:net';

export type MonitorListener = (time: string, args: string[], source: string) => void;

export interface RedisMonitor {
  on(event: 'monitor', listener: MonitorListener): this;
  disconnect(): void;
}

/** Opens a MONITOR connection to 127.0.0.1:`port`; resolves once Redis has answered +OK. */
export function openMonitor(port: number): Promise<RedisMonitor> {
  return new Promise((resolve, reject) => {
    const events = new EventEmitter();
    const socket = connect({ host: '127.0.0.1', port });
    const monitor: RedisMonitor = {
      on(event, listener) {
        events.on(event, listener);
        return this;
      },
      disconnect: () => socket.destroy(),
    };
    let buffered = '';
    let started = false;
    socket.setEncoding('latin1');
    socket.once('error', reject);
    socket.on('connect', () => socket.write('MONITOR\r\n'));
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      let end: number;
      while ((end = buffered.indexOf('\r\n')) >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (!started) {
          if (line !== '+OK') return reject(new Error(`MONITOR answered ${line}`));
          started = true;
          socket.on('error', () => {});
          resolve(monitor);
          continue;
        }
        const parsed = parseMonitorLine(line);
        if (parsed) events.emit('monitor', parsed.time, parsed.args, parsed.source);
      }
    });
  });
}

/** `+1700000000.123456 [0 127.0.0.1:5000] "set" "k" "v"` → its time, source and arguments. Pure. */
export function parseMonitorLine(line: string): { time: string; source: string; args: string[] } | undefined {
  const match = /^\+(\S+) \[\d+ ([^\]]+)\] (.*)$/.exec(line);
  if (!match) return undefined;
  return { time: match[1]!, source: match[2]!, args: quotedArgs(match[3]!) };
}

const ESCAPES: Record<string, string> = {
  n: '\n',
  r: '\r',
  t: '\t',
  a: '\x07',
  b: '\b',
  '"': '"',
  '\\': '\\',
};

/** Redis writes each argument quoted with C escapes (sdscatrepr); undoes that. */
function quotedArgs(text: string): string[] {
  const args: string[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] !== '"') {
      i++;
      continue;
    }
    let arg = '';
    i++;
    while (i < text.length && text[i] !== '"') {
      if (text[i] === '\\') {
        const next = text[i + 1]!;
        if (next === 'x') {
          arg += String.fromCharCode(parseInt(text.slice(i + 2, i + 4), 16));
          i += 4;
        } else {
          arg += ESCAPES[next] ?? next;
          i += 2;
        }
      } else arg += text[i++];
    }
    args.push(arg);
    i++;
  }
  return args;
}
