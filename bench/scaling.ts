/**
 * `delivery.scaling` (issue 4): the same backlog drained by one `serve`
 * node and then by two sharing one PostgreSQL database. The ratio is the
 * two-node rate over the one-node rate. On a machine where the nodes, the
 * database and the receiver share two cores it says what the lease and
 * claim machinery costs when nodes compete, not how far more machines go.
 */
import type { BenchContext, BenchDefinition, BenchReport } from './lib/bench-types.js';
import { createRig, type DrainFigures, maybeWaitQuiet, measureDrain, round } from './lib/delivery-rig.js';
import { preciseNow } from './lib/delivery-protocol.js';
import type { Target } from './lib/target.js';

const JOBS = 60_000;
/** Two nodes should drain at least as fast as one; anything less means they get in each other's way. */
const RATIO_TARGET = 1;

async function drainWith(context: BenchContext, nodes: number): Promise<DrainFigures & { nodes: number; peakRssMb: Array<number | undefined> }> {
  const { rig } = await createRig(context, `delivery.scaling ${nodes} node(s)`);
  try {
    await rig.prefill(JOBS);
    const plan = {
      total: JOBS,
      startCount: Math.round(JOBS * 0.1),
      warmupSec: Math.max(1, context.options.warmupSec),
      endCount: Math.round(JOBS * 0.9),
      windowSec: 2 * context.options.durationSec,
      timeoutSec: Math.max(1, context.options.warmupSec) + 2 * context.options.durationSec + 60,
    };
    await maybeWaitQuiet(context, 'delivery.scaling');
    await rig.receiver.reset({ phase: `${nodes}-node`, marks: [1, plan.startCount, plan.endCount], latency: false });
    const launchedAt = preciseNow();
    const servers: Target[] = [];
    try {
      for (let i = 0; i < nodes; i++) servers.push(await rig.launch(`delivery.scaling node ${i + 1} of ${nodes}`, false));
      // The drain's "sender" is all nodes together: their CPU seconds add up.
      const together = {
        pid: servers[0]!.pid,
        cpuSeconds: () => servers.reduce<number | undefined>((sum, s) => (sum === undefined || s.cpuSeconds() === undefined ? undefined : sum + s.cpuSeconds()!), 0),
        failure: () => servers.map((s) => s.failure()).find((f) => f !== undefined),
      };
      const figures = await measureDrain(rig.receiver, together, plan, launchedAt);
      context.log(`delivery.scaling: ${nodes} node(s): ${figures.deliveriesPerSec} deliveries/s`);
      return { ...figures, nodes, peakRssMb: servers.map((s) => s.peakRssMb()) };
    } finally {
      for (const server of servers) await server.stop();
    }
  } finally {
    await rig.close();
  }
}

async function runScaling(context: BenchContext): Promise<BenchReport> {
  if (context.options.store !== 'postgres') {
    throw new Error('delivery.scaling needs --store postgres: several nodes share one PostgreSQL database');
  }
  const one = await drainWith(context, 1);
  const two = await drainWith(context, 2);
  const ratio = one.deliveriesPerSec > 0 ? round(two.deliveriesPerSec / one.deliveriesPerSec, 3) : 0;
  const notes = [
    `${context.cpus.available.length} CPUs in all: the nodes, PostgreSQL and the receiver share them, so a second node can only use what the first leaves idle.`,
  ];
  if (context.cpus.pinned) notes.push('Both nodes are pinned to the server CPU(s) like every Switchyard process of the bench; run with --unpinned to let the second node use the other CPU.');
  return {
    description: `${JOBS} queued deliveries drained to one receiver by one serve node, then by two sharing the PostgreSQL database`,
    metric: 'deliveries/s (two nodes / one node)',
    ratio,
    target: RATIO_TARGET,
    pass: ratio >= RATIO_TARGET,
    oneNode: one,
    twoNodes: two,
    notes,
  };
}

export const scalingBenches: readonly BenchDefinition[] = [{ name: 'delivery.scaling', stores: ['postgres'], run: runScaling }];
