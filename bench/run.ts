/**
 * `npm run bench`: runs the benches of docs/targets.md's "Performance targets" and
 * prints one JSON object to stdout (progress goes to stderr). Every bench
 * compares Switchyard with a bare baseline measured in the same run, because
 * the machines are shared and noisy: the ratio is the figure that counts,
 * the absolute numbers are printed beside it.
 *
 * A new bench is a module exporting BenchDefinitions, added to BENCHES.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { backlogBenches } from './backlog.js';
import { deliveryBenches } from './delivery.js';
import { deliveryFeatureBenches } from './delivery-features.js';
import { engageBenches } from './engage.js';
import { functionBenches } from './function.js';
import { ingestBenches } from './ingest.js';
import { liveBenches } from './live.js';
import { sustainedLiveBenches } from './live-sustained.js';
import { planBenches } from './plan.js';
import { otelBenches } from './otel.js';
import { transformBenches } from './transform.js';
import { scalingBenches } from './scaling.js';
import type { BenchContext, BenchDefinition, RunOptions } from './lib/bench-types.js';
import { installExitHandlers, makeTempDir, removeTempDir, runCleanups, spawnManaged } from './lib/children.js';
import { type CpuPlan, planCpus } from './lib/cpu-plan.js';
import { freePort } from './lib/free-port.js';
import { describeLoadGenerator } from './lib/http-load.js';
import { writeReport } from './lib/report.js';
import { startSwitchyard } from './lib/switchyard-target.js';
import { startBaseline, type Target, waitHealthy, watchChild } from './lib/target.js';

const BENCHES: readonly BenchDefinition[] = [
  ...ingestBenches,
  ...liveBenches,
  ...sustainedLiveBenches,
  ...planBenches,
  ...otelBenches,
  ...transformBenches,
  ...deliveryBenches,
  ...deliveryFeatureBenches,
  ...functionBenches,
  ...engageBenches,
  ...backlogBenches,
  ...scalingBenches,
];

const USAGE = `usage: npm run bench -- [options]
  --only NAME[,NAME]   run only these benches (${BENCHES.map((b) => b.name).join(', ')})
  --duration S         measured seconds per side of each bench (default 10)
  --rounds N           alternate baseline and Switchyard N times, splitting --duration (default 2)
  --warmup S           warm-up seconds before every measured phase (default 2)
  --connections N      concurrent connections of the load generator (default 64)
  --store KIND         sqlite (default) or postgres
  --postgres-url URL   admin connection for the scratch database (default postgres://postgres@127.0.0.1:5432/postgres)
  --json-out FILE      also write the JSON to FILE
  --report FILE        also write a Markdown report to FILE (e.g. docs/performance.md) and its SVG chart next to it
  --cpu-prof DIR       write a V8 CPU profile of every Switchyard process to DIR (open in Chrome DevTools)
  --self-check         measure a second bare baseline in Switchyard's (and the floors') place: ratios should be ~1.0
  --wait-quiet S       before each phase, wait up to S seconds for other processes to leave the CPUs idle
  --unpinned           do not pin servers and load generator to separate CPUs`;

const FRAMEWORK_FLOOR_SCRIPT = fileURLToPath(new URL('./lib/fastify-floor-server.js', import.meta.url));
const STORE_FLOOR_SCRIPT = fileURLToPath(new URL('./lib/store-floor-server.js', import.meta.url));
const DURABLE_BASELINE_SCRIPT = fileURLToPath(new URL('./lib/durable-baseline-server.js', import.meta.url));

/** Started exactly like the baseline (same env, same pinning), so that only the framework differs. */
async function startFrameworkFloor(label: string, cpus: string | undefined): Promise<Target> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawnManaged(label, process.execPath, [FRAMEWORK_FLOOR_SCRIPT], {
    cpus,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1' },
  });
  await waitHealthy(child, url, label);
  return watchChild(label, child, url, {});
}

/** The store floor (`lib/store-floor-server.ts`) on a fresh temp dir, pinned like the baseline. */
function startStoreFloor(label: string, cpus: string | undefined): Promise<Target> {
  return startWithDataDir(label, cpus, STORE_FLOOR_SCRIPT, 'switchyard-store-floor-');
}

/** The durable baseline (`lib/durable-baseline-server.ts`) on a fresh temp dir, pinned like the baseline. */
function startDurableBaseline(label: string, cpus: string | undefined): Promise<Target> {
  return startWithDataDir(label, cpus, DURABLE_BASELINE_SCRIPT, 'switchyard-durable-baseline-');
}

/** Starts `script` like the baseline, with DATA_DIR a fresh temp dir removed when it stops. */
async function startWithDataDir(label: string, cpus: string | undefined, script: string, prefix: string): Promise<Target> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const dataDir = makeTempDir(prefix);
  const child = spawnManaged(label, process.execPath, [script], {
    cpus,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir },
  });
  await waitHealthy(child, url, label);
  return watchChild(label, child, url, {}, async () => removeTempDir(dataDir));
}

function fail(message: string): never {
  process.stderr.write(`${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function positive(name: string, raw: string | undefined, fallback: number, integer: boolean): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!(value > 0) || (integer && !Number.isInteger(value))) fail(`--${name} must be a positive ${integer ? 'integer' : 'number'}, got ${JSON.stringify(raw)}`);
  return value;
}

interface Cli {
  readonly options: RunOptions;
  readonly selected: readonly BenchDefinition[];
  readonly jsonOut: string | undefined;
  readonly report: string | undefined;
  readonly pin: boolean;
}

function parseCli(argv: string[]): Cli {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        only: { type: 'string' },
        duration: { type: 'string' },
        rounds: { type: 'string' },
        warmup: { type: 'string' },
        connections: { type: 'string' },
        store: { type: 'string' },
        'postgres-url': { type: 'string' },
        'json-out': { type: 'string' },
        report: { type: 'string' },
        'cpu-prof': { type: 'string' },
        'self-check': { type: 'boolean' },
        'wait-quiet': { type: 'string' },
        unpinned: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const store = values.store ?? 'sqlite';
  if (store !== 'sqlite' && store !== 'postgres') fail(`--store must be sqlite or postgres, got ${JSON.stringify(store)}`);

  let selected = BENCHES.filter((bench) => bench.stores === undefined || bench.stores.includes(store));
  if (values.only !== undefined) {
    const names = values.only.split(',').map((name) => name.trim()).filter(Boolean);
    const unknown = names.filter((name) => !BENCHES.some((bench) => bench.name === name));
    if (unknown.length > 0) fail(`unknown bench(es): ${unknown.join(', ')}`);
    selected = BENCHES.filter((bench) => names.includes(bench.name));
  }

  return {
    options: {
      durationSec: positive('duration', values.duration, 10, false),
      rounds: positive('rounds', values.rounds, 2, true),
      warmupSec: values.warmup === '0' ? 0 : positive('warmup', values.warmup, 2, false),
      connections: positive('connections', values.connections, 64, true),
      store,
      postgresUrl: values['postgres-url'] ?? 'postgres://postgres@127.0.0.1:5432/postgres',
      selfCheck: values['self-check'] === true,
      cpuProfileDir: values['cpu-prof'] === undefined ? undefined : path.resolve(values['cpu-prof']),
      quietWaitSec: values['wait-quiet'] === undefined || values['wait-quiet'] === '0' ? 0 : positive('wait-quiet', values['wait-quiet'], 0, false),
    },
    selected,
    jsonOut: values['json-out'],
    report: values.report,
    pin: values.unpinned !== true,
  };
}

function packageVersion(): string | undefined {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version;
  } catch {
    return undefined;
  }
}

function machine(): Record<string, unknown> {
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    totalMemoryMb: Math.round(os.totalmem() / 2 ** 20),
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    loadAverage1mAtStart: Math.round((os.loadavg()[0] ?? 0) * 100) / 100,
  };
}

async function main(): Promise<void> {
  const cli = parseCli(process.argv.slice(2));
  installExitHandlers();
  const started = Date.now();
  const log = (message: string): void => {
    process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${message}\n`);
  };

  const cpus = planCpus(cli.pin);
  log(cpus.note);
  const contextFor = (plan: CpuPlan, options: RunOptions = cli.options): BenchContext => ({
    options,
    cpus: plan,
    log,
    startBaseline: (label) => startBaseline(label, plan.server),
    startSwitchyard: (label) => startSwitchyard(label, options, plan.server),
    startFrameworkFloor: (label) => startFrameworkFloor(label, plan.server),
    startStoreFloor: (label) => startStoreFloor(label, plan.server),
    startDurableBaseline: (label) => startDurableBaseline(label, plan.server),
    unpinned: () => contextFor(planCpus(false), options),
    onStore: (store) => contextFor(plan, { ...options, store }),
  });
  const context = contextFor(cpus);

  const output = {
    date: new Date().toISOString(),
    machine: machine(),
    cores: {
      available: cpus.available.length,
      pinned: cpus.pinned,
      server: cpus.server === undefined ? 'shared' : { cpus: cpus.server, count: cpus.server.split(',').length },
      loadGenerator: cpus.loadGenerator === undefined ? 'shared' : { cpus: cpus.loadGenerator, count: cpus.loadGenerator.split(',').length },
      note:
        cli.options.store === 'postgres'
          ? `${cpus.note} PostgreSQL runs unpinned as a system service: its CPU counts under otherCpuPercent, not serverCpuPercent.`
          : cpus.note,
    },
    switchyard: {
      version: packageVersion(),
      store: cli.options.store,
      // Inherited by the server from this environment, like every other SWITCHYARD_* setting.
      durability: process.env['SWITCHYARD_DURABILITY'] ?? 'process',
      measured: cli.options.selfCheck ? 'self-check: a second bare baseline stands in for Switchyard and the floors' : 'bin/switchyard.js serve',
    },
    settings: { ...cli.options, postgresUrl: undefined, cpuProfileDir: undefined, loadGenerator: describeLoadGenerator() },
    benches: {} as Record<string, unknown>,
    // Informational benches have no target: listed apart, they never make the run fail.
    summary: { pass: true, passed: [] as string[], failed: [] as string[], informational: [] as string[], errored: [] as string[], elapsedSec: 0 },
  };

  for (const bench of cli.selected) {
    log(`${bench.name}: starting`);
    try {
      const report = await bench.run(context);
      output.benches[bench.name] = report;
      if (report.informational === true) {
        output.summary.informational.push(bench.name);
        log(`${bench.name}: ratio ${report.ratio} (informational, no target)`);
      } else {
        (report.pass ? output.summary.passed : output.summary.failed).push(bench.name);
        log(`${bench.name}: ratio ${report.ratio} (target ${report.target}) ${report.pass ? 'PASS' : 'FAIL'}`);
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      output.benches[bench.name] = { error: message };
      output.summary.errored.push(bench.name);
      log(`${bench.name}: error: ${message}`);
    }
  }
  await runCleanups();

  output.machine['loadAverage1mAtEnd'] = Math.round((os.loadavg()[0] ?? 0) * 100) / 100;
  output.summary.pass = output.summary.failed.length === 0 && output.summary.errored.length === 0;
  output.summary.elapsedSec = Math.round((Date.now() - started) / 100) / 10;
  const json = JSON.stringify(output, null, 2);
  process.stdout.write(`${json}\n`);
  if (cli.jsonOut !== undefined) writeFileSync(cli.jsonOut, `${json}\n`);
  if (cli.report !== undefined) log(`report: ${cli.report} and ${writeReport(output, cli.report)}`);
}

main().catch((error: unknown) => {
  process.stderr.write(`[bench] ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
