/**
 * Two builds, the same benches, alternated: is a change faster, or was the
 * machine quieter? On a shared 2-CPU host one run's figures move by a
 * quarter from run to run, far more than most changes; only a series of
 * alternating runs tells them apart.
 *
 *   npm run build --silent && node dist/bench/compare-builds.js \
 *     --against ../main --pairs 4 -- --only ingest.track --duration 8
 *
 * `--against DIR` is another checkout, already built (`DIR/dist/bench/run.js`);
 * everything after `--` goes to both sides' `run.js`. The runs go in ABBA
 * order (other, this, this, other, …) so that drift over the session lands on
 * both sides alike. Prints, per bench, each run's ratio and headline figures
 * (rate and CPU per message or delivery, where the bench reports them) with
 * their medians, and writes all of it as JSON to `--json-out` when given.
 * Every run's own output is kept in a temp folder, named at the end.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const USAGE = `usage: node dist/bench/compare-builds.js --against DIR [--pairs N] [--json-out FILE] -- <npm run bench options>
  --against DIR    another built checkout (its dist/bench/run.js runs the other side)
  --pairs N        runs per side, alternated ABBA (default 4)
  --json-out FILE  also write every run's figures and the medians as JSON`;

/** What one run of one bench is summed up by. */
interface RunFigures {
  readonly ratio: number | undefined;
  /** Switchyard's own figures the bench reports, by name (rate, CPU per unit). */
  readonly figures: Record<string, number>;
}

interface Side {
  readonly name: 'this' | 'other';
  readonly runScript: string;
}

/** Headline figures looked for on a bench's `switchyard` side, in this order. */
const HEADLINES = ['requestsPerSec', 'deliveriesPerSec', 'messagesPerSec', 'cpuMicrosPerMessage', 'cpuMicrosPerDelivery', 'mainThreadCpuMicrosPerMessage'] as const;

function fail(message: string): never {
  process.stderr.write(`${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function parseCli(argv: string[]): { against: string; pairs: number; jsonOut: string | undefined; benchArgs: string[] } {
  const split = argv.indexOf('--');
  const own = split === -1 ? argv : argv.slice(0, split);
  const benchArgs = split === -1 ? [] : argv.slice(split + 1);
  let values;
  try {
    ({ values } = parseArgs({ args: own, options: { against: { type: 'string' }, pairs: { type: 'string' }, 'json-out': { type: 'string' }, help: { type: 'boolean', short: 'h' } } }));
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  if (values.against === undefined) fail('--against DIR is required');
  const pairs = values.pairs === undefined ? 4 : Number(values.pairs);
  if (!Number.isInteger(pairs) || pairs < 1 || pairs > 50) fail(`--pairs must be an integer from 1 to 50, got ${JSON.stringify(values.pairs)}`);
  if (benchArgs.some((arg) => arg === '--json-out' || arg.startsWith('--json-out='))) fail('--json-out after -- is set by this script for every run');
  return { against: path.resolve(values.against), pairs, jsonOut: values['json-out'], benchArgs };
}

/** The figures of every bench in one run's JSON output. */
function figuresOf(output: unknown): Map<string, RunFigures> {
  const result = new Map<string, RunFigures>();
  const benches = (output as { benches?: Record<string, Record<string, unknown>> }).benches ?? {};
  for (const [name, report] of Object.entries(benches)) {
    const switchyard = (report['switchyard'] ?? {}) as Record<string, unknown>;
    const figures: Record<string, number> = {};
    for (const key of HEADLINES) {
      const value = switchyard[key];
      if (typeof value === 'number') figures[key] = value;
    }
    result.set(name, { ratio: typeof report['ratio'] === 'number' ? report['ratio'] : undefined, figures });
  }
  return result;
}

function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const value = sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  // Three decimals: ratios are printed that way; rates and µs need none.
  return Math.round(value * 1000) / 1000;
}

function runOnce(side: Side, benchArgs: readonly string[], jsonFile: string, logFile: string): Promise<number | null> {
  const log = openSync(logFile, 'w');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [side.runScript, ...benchArgs, '--json-out', jsonFile], { stdio: ['ignore', 'ignore', log], cwd: path.dirname(path.dirname(path.dirname(side.runScript))) });
    child.on('error', reject);
    child.on('exit', (code) => {
      closeSync(log);
      resolve(code);
    });
  });
}

async function main(): Promise<void> {
  const cli = parseCli(process.argv.slice(2));
  const thisScript = fileURLToPath(new URL('./run.js', import.meta.url));
  const otherScript = path.join(cli.against, 'dist', 'bench', 'run.js');
  if (!existsSync(otherScript)) fail(`${otherScript} does not exist: build that checkout first (npm run build)`);
  const sides: Record<Side['name'], Side> = { this: { name: 'this', runScript: thisScript }, other: { name: 'other', runScript: otherScript } };
  const folder = mkdtempSync(path.join(os.tmpdir(), 'switchyard-compare-'));
  // ABBA over the whole series: other, this, this, other, other, this, …
  const order: Array<Side['name']> = [];
  for (let pair = 0; pair < cli.pairs; pair++) order.push(...(pair % 2 === 0 ? (['other', 'this'] as const) : (['this', 'other'] as const)));

  const runs: Record<Side['name'], Array<Map<string, RunFigures>>> = { this: [], other: [] };
  for (const [index, name] of order.entries()) {
    const jsonFile = path.join(folder, `${index + 1}-${name}.json`);
    const logFile = path.join(folder, `${index + 1}-${name}.log`);
    process.stderr.write(`[compare] run ${index + 1}/${order.length}: ${name}\n`);
    const code = await runOnce(sides[name], cli.benchArgs, jsonFile, logFile);
    if (!existsSync(jsonFile)) fail(`run ${index + 1} (${name}) wrote no JSON (exit code ${code}): see ${logFile}`);
    runs[name].push(figuresOf(JSON.parse(readFileSync(jsonFile, 'utf8')) as unknown));
  }

  const benches = new Set([...runs.this, ...runs.other].flatMap((run) => [...run.keys()]));
  const summary: Record<string, unknown> = {};
  const lines: string[] = [];
  for (const bench of benches) {
    const perSide: Record<string, unknown> = {};
    lines.push(`${bench}`);
    for (const name of ['other', 'this'] as const) {
      const series = runs[name].map((run) => run.get(bench)).filter((r): r is RunFigures => r !== undefined);
      const ratios = series.map((r) => r.ratio).filter((r): r is number => r !== undefined);
      const figures: Record<string, { series: number[]; median: number | undefined }> = {};
      for (const key of HEADLINES) {
        const values = series.map((r) => r.figures[key]).filter((v): v is number => v !== undefined);
        if (values.length > 0) figures[key] = { series: values, median: median(values) };
      }
      perSide[name] = { ratios, ratioMedian: median(ratios), figures };
      lines.push(`  ${name.padEnd(5)} ratio ${ratios.join(' / ')} (median ${median(ratios) ?? '-'})`);
      for (const [key, { series: values, median: middle }] of Object.entries(figures)) lines.push(`        ${key} ${values.join(' / ')} (median ${middle})`);
    }
    summary[bench] = perSide;
  }
  lines.push(`runs in ABBA order (${order.join(', ')}); every run's output: ${folder}`);
  process.stdout.write(`${lines.join('\n')}\n`);
  if (cli.jsonOut !== undefined) writeFileSync(cli.jsonOut, `${JSON.stringify({ against: cli.against, pairs: cli.pairs, benchArgs: cli.benchArgs, order, benches: summary }, null, 2)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
