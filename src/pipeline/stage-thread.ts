/**
 * Entry of the stage thread: the background stages on their own event loop
 * and their own store connection, so delivery (claims, signing, HTTP) and
 * deletion steps never hold up the ingest thread's event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { pino } from 'pino';
import { Metrics } from '../metrics.js';
import { SuppressionList } from '../regulations/suppression-list.js';
import { SourceDirectory } from '../sources/source-directory.js';
import { openStore } from '../store/open-store.js';
import { adoptWriteLocks } from '../store/sqlite/write-lock.js';
import { startTracing } from '../telemetry/start-tracing.js';
import { startBackgroundStages } from './background-stages.js';
import type { FromStageThread, StageThreadData, ToStageThread } from './stage-protocol.js';

const CONFIG_POLL_MS = 1_000;

async function main(): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error('stage-thread.js runs only as a worker thread');
  const { config, logLevel, sqliteWriteLocks } = workerData as StageThreadData;
  adoptWriteLocks(sqliteWriteLocks);
  const logger = pino({ level: logLevel }).child({ thread: 'stages' });
  const onError = (error: unknown): void => logger.error({ err: error }, 'background task failed');
  const send = (message: FromStageThread): void => port.postMessage(message);

  // Its own provider and exporter: an exporter belongs to one event loop.
  const tracing = await startTracing(config.tracing);
  const store = await openStore(config, logger);
  // Only the stages' own metrics: process-wide ones come from the main thread.
  const metrics = new Metrics({ processMetrics: false });
  const directory = new SourceDirectory(store, { pollMs: CONFIG_POLL_MS, onError });
  const suppressions = new SuppressionList(store, { pollMs: CONFIG_POLL_MS, onError });
  await directory.start();
  await suppressions.start();
  const stages = await startBackgroundStages({ store, config, logger, metrics, directory, suppressions, now: Date.now, tracing });

  port.on('message', (message: ToStageThread) => {
    switch (message.type) {
      case 'wake':
        if (message.stage === 'regulations') stages.wakeRegulations();
        else if (message.stage === 'replays') stages.wakeReplays();
        else stages.engageDefinitionsChanged();
        break;
      case 'metrics':
        metrics.registry.getMetricsAsJSON().then(
          (snapshot) => send({ type: 'metrics', id: message.id, metrics: snapshot }),
          onError,
        );
        break;
      case 'circuits':
        stages.circuits().then((circuits) => send({ type: 'circuits', id: message.id, circuits: circuits ?? [] }), onError);
        break;
      case 'stop':
        void (async () => {
          await stages.stop();
          directory.stop();
          suppressions.stop();
          await store.close();
          await tracing.shutdown().catch(onError);
          send({ type: 'stopped' });
          port.close();
        })();
        break;
    }
  });
  send({ type: 'ready' });
}

await main();
