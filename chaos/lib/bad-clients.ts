/**
 * The misbehaving clients of the slow-and-endless-clients scenario, in a
 * process of their own so that pushing hundreds of MB/s does not delay the
 * runner's normal client and skew its latencies. One JSON argument
 * (BadClientsArgs); writes a BadClientsReport line to stdout every second
 * and a last one on SIGTERM.
 *
 * Usage: node dist/chaos/lib/bad-clients.js '{"port":…}'
 */
import net from 'node:net';
import { type BadClientsArgs, type BadClientsReport, type ClientReport, PIPELINE_DEPTH, READ_BYTES_PER_SEC } from './bad-clients-protocol.js';

/** Bytes one endless client may send at most (the bound on the scenario, not on the server). */
const ENDLESS_CAP_BYTES = 512 * 2 ** 20;

interface ClientStats {
  bytesSent: number;
  bytesRead: number;
  requests: number;
  firstStatusLine: string | undefined;
  /** When the server closed the connection (not set when the client closed it). */
  closedAfterMs: number | undefined;
  closedByClient: boolean;
  error: string | undefined;
}

function newStats(): ClientStats {
  return { bytesSent: 0, bytesRead: 0, requests: 0, firstStatusLine: undefined, closedAfterMs: undefined, closedByClient: false, error: undefined };
}

function connect(port: number, stats: ClientStats, started: number): net.Socket {
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.on('data', (chunk: Buffer) => {
    stats.bytesRead += chunk.length;
    stats.firstStatusLine ??= chunk.toString('latin1').split('\r\n', 1)[0];
  });
  socket.on('error', (error) => (stats.error ??= error.message));
  socket.on('close', () => {
    if (!stats.closedByClient) stats.closedAfterMs = Date.now() - started;
  });
  return socket;
}

/**
 * Keeps PIPELINE_DEPTH valid track calls pipelined on one connection and
 * reads the answers at READ_BYTES_PER_SEC: the server holds its answers
 * until the client takes them.
 */
function slowReader(port: number, authorization: string, index: number, started: number): { stats: ClientStats; stop: () => void } {
  const stats = newStats();
  const socket = connect(port, stats, started);
  let answers = 0;
  let carry = '';
  let stopped = false;
  let resumeTimer: NodeJS.Timeout | undefined;
  const pump = (): void => {
    while (!stopped && !socket.destroyed && stats.requests - answers < PIPELINE_DEPTH) {
      const body = JSON.stringify({ type: 'track', userId: 'slow', event: 'Slow', messageId: `slow-${index}-${stats.requests}` });
      const request = `POST /v1/track HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      stats.requests += 1;
      stats.bytesSent += request.length;
      if (!socket.write(request)) return;
    }
  };
  socket.on('data', (chunk: Buffer) => {
    const text = carry + chunk.toString('latin1');
    answers += text.split('HTTP/1.1 ').length - 1;
    carry = text.slice(-8);
    // Read no faster than READ_BYTES_PER_SEC on average.
    socket.pause();
    resumeTimer = setTimeout(() => {
      if (!stopped) socket.resume();
    }, (chunk.length / READ_BYTES_PER_SEC) * 1000);
    pump();
  });
  socket.on('connect', pump);
  socket.on('drain', pump);
  return {
    stats,
    stop: () => {
      stopped = true;
      stats.closedByClient = true;
      clearTimeout(resumeTimer);
      socket.destroy();
    },
  };
}

/** An endless chunked /v1/batch body, as fast as the server reads it, or one small chunk a second when `trickle`. */
function endlessBody(port: number, authorization: string, trickle: boolean, started: number): { stats: ClientStats; stop: () => void } {
  const stats = newStats();
  const socket = connect(port, stats, started);
  const element = JSON.stringify({ type: 'track', userId: 'endless', event: 'Endless', properties: { pad: 'y'.repeat(200) } });
  const big = Buffer.from(`${Array.from({ length: 256 }, () => element).join(',')},`);
  const small = Buffer.from(`${element},`);
  const chunk = (data: Buffer): Buffer => Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')]);
  let stopped = false;
  let trickleTimer: NodeJS.Timeout | undefined;
  const send = (data: Buffer): boolean => {
    stats.bytesSent += data.length;
    return socket.write(data);
  };
  const pump = (): void => {
    while (!stopped && !socket.destroyed && stats.bytesSent < ENDLESS_CAP_BYTES) {
      if (!send(chunk(big))) return;
    }
  };
  socket.on('connect', () => {
    stats.requests = 1;
    send(Buffer.from(`POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`));
    send(chunk(Buffer.from('{"batch":[')));
    if (trickle) {
      trickleTimer = setInterval(() => {
        if (!stopped && !socket.destroyed) send(chunk(small));
      }, 1000);
    } else {
      pump();
    }
  });
  socket.on('drain', pump);
  return {
    stats,
    stop: () => {
      stopped = true;
      stats.closedByClient = true;
      clearInterval(trickleTimer);
      socket.destroy();
    },
  };
}

function report(stats: ClientStats): ClientReport {
  return {
    sentMb: Math.round(stats.bytesSent / 2 ** 20 * 10) / 10,
    requests: stats.requests,
    readMb: Math.round((stats.bytesRead / 2 ** 20) * 1000) / 1000,
    answer: stats.firstStatusLine ?? '(none)',
    closedByServerAfterSec: stats.closedAfterMs === undefined ? undefined : Math.round(stats.closedAfterMs / 100) / 10,
  };
}

function main(): void {
  const args = JSON.parse(process.argv[2] ?? '{}') as BadClientsArgs;
  const started = Date.now();
  const slow = Array.from({ length: args.slowReaders }, (_, i) => slowReader(args.port, args.authorization, i, started));
  const endless = Array.from({ length: args.fastEndless }, () => endlessBody(args.port, args.authorization, false, started));
  const trickle = args.trickle ? endlessBody(args.port, args.authorization, true, started) : undefined;
  const write = (): void => {
    const line: BadClientsReport = {
      slowReaders: slow.map((c) => report(c.stats)),
      fastEndless: endless.map((c) => report(c.stats)),
      trickle: trickle === undefined ? undefined : report(trickle.stats),
    };
    process.stdout.write(`${JSON.stringify(line)}\n`);
  };
  const ticker = setInterval(write, 1000);
  process.once('SIGTERM', () => {
    clearInterval(ticker);
    write();
    for (const client of [...slow, ...endless, ...(trickle === undefined ? [] : [trickle])]) client.stop();
    process.exit(0);
  });
}

main();
