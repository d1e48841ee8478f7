/**
 * The attack of the pipeline-flood scenario: connections that pipeline
 * thousands of valid calls and never read an answer, beside connections that
 * trickle a body a few bytes a second. Usable in the test's process (small
 * counts) or as a child of the chaos runner (one JSON argument, FloodArgs;
 * a FloodReport line on stdout every second and on SIGTERM).
 *
 * Usage: node dist/chaos/lib/flood-clients.js '{"port":…}'
 */
import net from 'node:net';
import { fileURLToPath } from 'node:url';

export interface FloodArgs {
  readonly port: number;
  readonly authorization: string;
  /** Connections that write `requestsEach` pipelined calls at once and never read. */
  readonly pipeliners: number;
  readonly requestsEach: number;
  /** Connections that announce a body and send a few bytes of it a second. */
  readonly tricklers: number;
}

export interface FloodReport {
  /** Bytes the pipeliners got written into the connection (the rest waits in their own buffers). */
  readonly pipelinedMb: number;
  /** Connections the server closed, of each kind. */
  readonly pipelinersCut: number;
  readonly tricklersCut: number;
  /** Seconds from the start to the last connection the server closed. */
  readonly lastCutAfterSec: number | undefined;
}

export interface Flood {
  report(): FloodReport;
  stop(): void;
}

/** Starts the attack; every socket is closed by `stop()`. */
export function startFlood(args: FloodArgs): Flood {
  const started = Date.now();
  const sockets: net.Socket[] = [];
  let stopping = false;
  let pipelinersCut = 0;
  let tricklersCut = 0;
  let lastCutAt: number | undefined;
  const timers: NodeJS.Timeout[] = [];
  const onClose = (kind: 'pipeliner' | 'trickler') => () => {
    if (stopping) return;
    if (kind === 'pipeliner') pipelinersCut++;
    else tricklersCut++;
    lastCutAt = Date.now();
  };

  const body = JSON.stringify({ type: 'track', userId: 'flood', event: 'Flood' });
  const request = `POST /v1/track HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${args.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const everything = Buffer.from(request.repeat(args.requestsEach));
  for (let i = 0; i < args.pipeliners; i++) {
    const socket = net.connect({ host: '127.0.0.1', port: args.port });
    socket.pause(); // never reads an answer
    socket.on('error', () => undefined);
    socket.on('close', onClose('pipeliner'));
    socket.on('connect', () => socket.write(everything));
    sockets.push(socket);
  }
  for (let i = 0; i < args.tricklers; i++) {
    const socket = net.connect({ host: '127.0.0.1', port: args.port });
    socket.on('error', () => undefined);
    socket.on('close', onClose('trickler'));
    socket.on('data', () => undefined);
    socket.on('connect', () => {
      socket.write(`POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${args.authorization}\r\nContent-Type: application/json\r\nContent-Length: 400000\r\n\r\n{"batch":[`);
      const timer = setInterval(() => {
        if (!socket.destroyed) socket.write('{"type":"track","userId":"t","event":"T"},');
      }, 1_000);
      timers.push(timer);
    });
    sockets.push(socket);
  }

  return {
    report: () => ({
      pipelinedMb: Math.round((sockets.slice(0, args.pipeliners).reduce((n, s) => n + s.bytesWritten - s.writableLength, 0) / 2 ** 20) * 10) / 10,
      pipelinersCut,
      tricklersCut,
      lastCutAfterSec: lastCutAt === undefined ? undefined : Math.round((lastCutAt - started) / 100) / 10,
    }),
    stop() {
      stopping = true;
      for (const timer of timers) clearInterval(timer);
      for (const socket of sockets) socket.destroy();
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const flood = startFlood(JSON.parse(process.argv[2] ?? '{}') as FloodArgs);
  const write = (): void => {
    process.stdout.write(`${JSON.stringify(flood.report())}\n`);
  };
  const ticker = setInterval(write, 1000);
  process.once('SIGTERM', () => {
    clearInterval(ticker);
    write();
    flood.stop();
    process.exit(0);
  });
}
