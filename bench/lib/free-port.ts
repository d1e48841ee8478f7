import net from 'node:net';

/**
 * A loopback port that was free a moment ago. Switchyard takes its port from
 * PORT, so the port has to be chosen before it starts; the small window in
 * which another process could grab it is acceptable for a benchmark.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no port assigned'))));
    });
  });
}
