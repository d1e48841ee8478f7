/**
 * `npm run chaos`: the fault scenarios of docs/targets.md's "Reliability targets"
 * that do not fit in CI. Each is bounded in time and count, runs on
 * loopback only, prints what it did and a PASS/FAIL/SKIPPED verdict; the
 * exit code is 1 when any scenario failed. Children and temp dirs go away
 * on exit, however the run ends.
 */
import { parseArgs } from 'node:util';
import { installExitHandlers, runCleanups } from '../bench/lib/children.js';
import { backlogFairness } from './backlog-fairness.js';
import { diskFull } from './disk-full.js';
import { type Scenario, type ScenarioResult, Scope } from './lib/harness.js';
import { killUnderLoad } from './kill-under-load.js';
import { pipelineFlood } from './pipeline-flood.js';
import { receiverOutage } from './receiver-outage.js';
import { slowAndEndlessClients } from './slow-clients.js';

const SCENARIOS: readonly Scenario[] = [killUnderLoad, receiverOutage, backlogFairness, slowAndEndlessClients, pipelineFlood, diskFull];

const USAGE = `usage: npm run chaos -- [options]
  --only NAME[,NAME]   run only these scenarios (${SCENARIOS.map((s) => s.name).join(', ')})
  --quick              shorter variants (fewer kills, shorter phases), each under a minute
  --json               also print the results as one JSON object at the end
  -h, --help`;

function fail(message: string): never {
  process.stderr.write(`${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function parseCli(argv: string[]): { selected: readonly Scenario[]; quick: boolean; json: boolean } {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { only: { type: 'string' }, quick: { type: 'boolean' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } }));
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  let selected = SCENARIOS;
  if (values.only !== undefined) {
    const names = values.only.split(',').map((name) => name.trim()).filter(Boolean);
    const unknown = names.filter((name) => !SCENARIOS.some((s) => s.name === name));
    if (unknown.length > 0) fail(`unknown scenario(s): ${unknown.join(', ')}`);
    selected = SCENARIOS.filter((s) => names.includes(s.name));
  }
  return { selected, quick: values.quick === true, json: values.json === true };
}

async function runOne(scenario: Scenario, quick: boolean, started: number): Promise<ScenarioResult> {
  const log = (message: string): void => {
    process.stdout.write(`[chaos ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${scenario.name}: ${message}\n`);
  };
  const scope = new Scope();
  const limitSec = scenario.timeoutSec(quick);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<ScenarioResult>((resolve) => {
    timer = setTimeout(
      () => resolve({ verdict: 'FAIL', checks: [{ name: 'finished in time', pass: false, detail: `still running after ${limitSec} s: stopped` }], figures: {} }),
      limitSec * 1000,
    );
  });
  log(`${scenario.summary}${quick ? ' (quick)' : ''}`);
  try {
    return await Promise.race([scenario.run({ quick, log, defer: (action) => scope.defer(action) }), timedOut]);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { verdict: 'FAIL', checks: [{ name: 'ran to the end', pass: false, detail: `error: ${message}` }], figures: {} };
  } finally {
    clearTimeout(timer);
    await scope.close(log);
  }
}

async function main(): Promise<void> {
  const cli = parseCli(process.argv.slice(2));
  installExitHandlers();
  const started = Date.now();
  const results: Record<string, ScenarioResult & { elapsedSec: number }> = {};
  for (const scenario of cli.selected) {
    const scenarioStarted = Date.now();
    const result = await runOne(scenario, cli.quick, started);
    const elapsedSec = Math.round((Date.now() - scenarioStarted) / 100) / 10;
    results[scenario.name] = { ...result, elapsedSec };
    const out = process.stdout;
    out.write(`\n== ${scenario.name}: ${result.verdict}${result.reason === undefined ? '' : ` (${result.reason})`} in ${elapsedSec} s\n`);
    for (const c of result.checks) out.write(`   ${c.pass ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}\n`);
    for (const [key, value] of Object.entries(result.figures)) out.write(`   ${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}\n`);
    out.write('\n');
  }
  await runCleanups();
  const failed = Object.entries(results).filter(([, r]) => r.verdict === 'FAIL').map(([name]) => name);
  process.stdout.write(`chaos: ${Object.entries(results).map(([name, r]) => `${name} ${r.verdict}`).join(', ')}; ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  if (cli.json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  process.exitCode = failed.length > 0 ? 1 : 0;
}

main().catch((error: unknown) => {
  process.stderr.write(`[chaos] ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
