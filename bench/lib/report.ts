/**
 * The performance report: a Markdown page and an SVG chart next to it, made
 * from the JSON `npm run bench` prints. `run.ts --report FILE` writes it
 * after a run; for a saved JSON:
 *
 *   node dist/bench/lib/report.js run.json docs/performance.md
 *
 * The chart (FILE with .svg for .md) has two panels: each bench's ratio
 * against its target, and p50/p95/p99 latencies (log scale) of the benches
 * that have them. Plain SVG written here: no dependency. Informational
 * benches (no target, e.g. the Fastify floor) never count as FAIL: they get
 * a table of their own and grey bars, and a floor is also marked on the
 * rows of the benches it bounds.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

type Json = Record<string, unknown>;

/** Writes `markdownPath` and the SVG next to it; returns the SVG's path. */
export function writeReport(output: Json, markdownPath: string): string {
  const svgPath = markdownPath.replace(/\.md$/i, '') + '.svg';
  writeFileSync(svgPath, renderChart(output));
  writeFileSync(markdownPath, renderMarkdown(output, path.basename(svgPath)));
  return svgPath;
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function obj(value: unknown): Json {
  return isObject(value) ? value : {};
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function fmt(value: unknown): string {
  if (typeof value === 'number') return value.toLocaleString('en-US', { maximumFractionDigits: 3 });
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (value === undefined || value === null) return '–';
  if (Array.isArray(value)) return value.map(fmt).join(', ');
  const raw = typeof value === 'string' ? value : JSON.stringify(value);
  return raw.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function benches(output: Json): Array<[string, Json]> {
  return Object.entries(obj(output['benches'])).map(([name, bench]) => [name, obj(bench)]);
}

function informational(bench: Json): boolean {
  return bench['informational'] === true;
}

/**
 * An informational bench whose `ratio` is a measured value with no baseline
 * (`ratioKind: "value"`, e.g. transform.first-call's milliseconds): shown in
 * its own section only, not among the floors nor in the ratio chart.
 */
function valueOnly(bench: Json): boolean {
  return informational(bench) && bench['ratioKind'] === 'value';
}

/** Each judged bench's lowest floor: the least ratio of the informational benches that name it in `floorOf`. */
function floors(output: Json): Map<string, number> {
  const out = new Map<string, number>();
  for (const [, bench] of benches(output)) {
    const ratio = num(bench['ratio']);
    if (!informational(bench) || ratio === undefined || !Array.isArray(bench['floorOf'])) continue;
    for (const of of bench['floorOf']) if (typeof of === 'string') out.set(of, Math.min(out.get(of) ?? Infinity, ratio));
  }
  return out;
}

/** What stands in Switchyard's place in a floor bench. */
function floorName(bench: Json): string {
  return bench['floorKind'] === 'store' ? 'Store floor' : 'Fastify floor';
}

/** The two sides a bench compares, when it has them. */
function sides(bench: Json): { labels: [string, string]; a: Json; b: Json } | undefined {
  if (isObject(bench['switchyard']) && isObject(bench['baseline'])) return { labels: ['Switchyard', 'Baseline'], a: bench['switchyard'], b: bench['baseline'] };
  if (isObject(bench['floor']) && isObject(bench['baseline'])) return { labels: [floorName(bench), 'Baseline'], a: bench['floor'], b: bench['baseline'] };
  if (isObject(bench['big']) && isObject(bench['small'])) return { labels: ['Big queue', 'Small queue'], a: bench['big'], b: bench['small'] };
  if (isObject(bench['postgresMean']) && isObject(bench['sqliteMean'])) return { labels: ['PostgreSQL', 'SQLite'], a: bench['postgresMean'], b: bench['sqliteMean'] };
  return undefined;
}

/** The figure the metric names, per side: what the ratio divides. */
function headline(bench: Json): [string, string] {
  const metric = typeof bench['metric'] === 'string' ? bench['metric'] : '';
  const pair = sides(bench);
  const field = metric.startsWith('requests/s') ? 'requestsPerSec' : metric.startsWith('messages/s') ? 'messagesPerSec' : metric.startsWith('deliveries/s') ? 'deliveriesPerSec' : undefined;
  if (pair !== undefined && field !== undefined) return [fmt(pair.a[field]), fmt(pair.b[field])];
  const p99 = num(obj(bench['endToEndMs'])['p99']);
  if (p99 !== undefined) return [`p99 ${fmt(p99)} ms`, `target p99 ${fmt(bench['targetP99Ms'])} ms`];
  return ['–', '–'];
}

/** Numeric (and short string) leaves, as dotted paths; arrays and long texts left out. */
function leaves(value: Json, prefix = '', depth = 0): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  for (const [key, item] of Object.entries(value)) {
    const name = prefix === '' ? key : `${prefix}.${key}`;
    if (isObject(item)) {
      if (depth < 2) out.push(...leaves(item, name, depth + 1));
    } else if (typeof item === 'number' || typeof item === 'boolean' || (typeof item === 'string' && item.length <= 40)) {
      out.push([name, item]);
    }
  }
  return out;
}

const HEADER_FIELDS = new Set(['description', 'metric', 'ratio', 'ratioKind', 'target', 'pass', 'informational', 'floorOf', 'floorKind', 'notes', 'phases', 'error']);

function benchSection(name: string, bench: Json): string[] {
  const lines = [`### ${name}`, ''];
  if (typeof bench['error'] === 'string') return [...lines, `**Error:** ${fmt(bench['error'])}`, ''];
  if (typeof bench['description'] === 'string') lines.push(bench['description'], '');
  const verdict = informational(bench)
    ? `informational, no target${Array.isArray(bench['floorOf']) ? `; the ${bench['floorKind'] === 'store' ? 'store floor' : 'Fastify floor'} of ${fmt(bench['floorOf'])}` : ''}`
    : `target ${fmt(bench['target'])}, ${bench['pass'] === true ? 'PASS' : 'FAIL'}`;
  lines.push(`**${valueOnly(bench) ? 'Measured' : 'Ratio'} ${fmt(bench['ratio'])}** (${verdict}); metric: ${fmt(bench['metric'])}.`, '');
  const pair = sides(bench);
  if (pair !== undefined) {
    const a = new Map(leaves(pair.a));
    const b = new Map(leaves(pair.b));
    // A side measured in rounds (before and after) shows the mean of its rounds where it has no figure of its own.
    for (const [side, figures] of [[pair.a, a], [pair.b, b]] as const) {
      const rounds = Array.isArray(side['rounds']) ? side['rounds'].filter(isObject) : [];
      if (rounds.length === 0) continue;
      const perRound = rounds.map((r) => new Map(leaves(r)));
      for (const figure of perRound[0]?.keys() ?? []) {
        const values = perRound.map((m) => num(m.get(figure)));
        if (figures.has(figure) || values.some((v) => v === undefined)) continue;
        figures.set(figure, `${fmt(values.reduce<number>((sum, v) => sum + (v ?? 0), 0) / values.length)} (mean of ${values.length} rounds)`);
      }
    }
    const names = [...new Set([...a.keys(), ...b.keys()])];
    lines.push(`| Figure | ${pair.labels[0]} | ${pair.labels[1]} |`, '|---|--:|--:|');
    for (const figure of names) lines.push(`| ${figure} | ${fmt(a.get(figure))} | ${fmt(b.get(figure))} |`);
    lines.push('');
  }
  const rest: Json = {};
  for (const [key, value] of Object.entries(bench)) {
    if (HEADER_FIELDS.has(key) || (pair !== undefined && (value === pair.a || value === pair.b))) continue;
    rest[key] = value;
  }
  const other = leaves(rest);
  if (Array.isArray(bench['roundRatios'])) other.push(['roundRatios', bench['roundRatios']]);
  if (other.length > 0) {
    lines.push('| Other figure | Value |', '|---|--:|');
    for (const [figure, value] of other) lines.push(`| ${figure} | ${fmt(value)} |`);
    lines.push('');
  }
  const notes = Array.isArray(bench['notes']) ? bench['notes'] : [];
  if (notes.length > 0) lines.push('Notes:', '', ...notes.map((note) => `- ${fmt(note)}`), '');
  return lines;
}

/** The informational benches beside the ratios they bound; `Bench ÷ floor` is how much of the floor's reach the bench uses. */
function floorTable(output: Json): string[] {
  const rows = benches(output).filter(([, bench]) => informational(bench) && !valueOnly(bench) && typeof bench['error'] !== 'string');
  if (rows.length === 0) return [];
  const lines = [
    '',
    '### Floors (informational, no target)',
    '',
    'Measured against the same bare baseline in the same run. Fastify floor: a Fastify 5 server that only parses the body with Fastify\'s default JSON parser and answers 200, ' +
      'the best any Fastify-based collector can do on this machine before storing anything. Store floor: a bare `node:http` server that stores each message as one ' +
      'SQLite row (group-committed, unique messageId) before its 200, the best any collector that keeps every message as a row can do, with no framework and no later stage.',
    '',
    '| Floor bench | Metric | Floor server | Floor | Baseline | Floor ratio | Bench | Bench ratio | Bench ÷ floor |',
    '|---|---|---|--:|--:|--:|---|--:|--:|',
  ];
  const all = new Map(benches(output));
  for (const [name, bench] of rows) {
    const [a, b] = headline(bench);
    const floor = num(bench['ratio']);
    // Only the bounded benches this run measured: a floor run alone still gets its one row.
    const bounded = Array.isArray(bench['floorOf']) ? bench['floorOf'].filter((of): of is string => typeof of === 'string' && all.has(of)) : [];
    for (const of of bounded.length > 0 ? bounded : ['–']) {
      const ratio = num(all.get(of)?.['ratio']);
      const share = ratio !== undefined && floor !== undefined && floor > 0 ? Math.round((ratio / floor) * 1000) / 1000 : undefined;
      lines.push(`| ${name} | ${fmt(bench['metric'])} | ${floorName(bench)} | ${a} | ${b} | ${fmt(floor)} | ${of} | ${fmt(ratio)} | ${fmt(share)} |`);
    }
  }
  return lines;
}

function reproduce(output: Json): string {
  const settings = obj(output['settings']);
  const args: string[] = [];
  const names = benches(output).map(([name]) => name);
  if (names.length > 0) args.push(`--only ${names.join(',')}`);
  const flags: Array<[string, string]> = [['durationSec', '--duration'], ['rounds', '--rounds'], ['warmupSec', '--warmup'], ['connections', '--connections'], ['store', '--store']];
  for (const [key, flag] of flags) if (settings[key] !== undefined) args.push(`${flag} ${fmt(settings[key])}`);
  if (settings['selfCheck'] === true) args.push('--self-check');
  if (num(settings['quietWaitSec']) !== undefined && settings['quietWaitSec'] !== 0) args.push(`--wait-quiet ${fmt(settings['quietWaitSec'])}`);
  const durability = obj(output['switchyard'])['durability'];
  const env = durability === 'fsync' ? 'SWITCHYARD_DURABILITY=fsync ' : '';
  return `${env}npm run bench -- ${args.join(' ')} --json-out bench.json --report docs/performance.md`;
}

export function renderMarkdown(output: Json, svgName: string): string {
  const machine = obj(output['machine']);
  const cores = obj(output['cores']);
  const switchyard = obj(output['switchyard']);
  const summary = obj(output['summary']);
  const lines = [
    '# Performance',
    '',
    `Measured ${fmt(output['date'])} with \`npm run bench\` (see [bench/README.md](../bench/README.md) for how each bench runs). ` +
      `Every bench compares Switchyard with a bare baseline in the same run; the **ratio** is the figure that counts, judged against its target in [targets.md](targets.md).`,
    '',
    `Overall: **${summary['pass'] === true ? 'PASS' : 'FAIL'}** (passed: ${fmt(summary['passed']) || '–'}; failed: ${fmt(summary['failed']) || '–'}; errored: ${fmt(summary['errored']) || '–'}` +
      `${Array.isArray(summary['informational']) && summary['informational'].length > 0 ? `; informational, no target: ${fmt(summary['informational'])}` : ''}), ${fmt(summary['elapsedSec'])} s.`,
    '',
    '## Machine',
    '',
    '| | |',
    '|---|---|',
    `| CPUs | ${fmt(machine['cpus'])} × ${fmt(machine['cpuModel'])} |`,
    `| Memory | ${fmt(machine['totalMemoryMb'])} MB |`,
    `| Node.js | ${fmt(machine['node'])} |`,
    `| Platform | ${fmt(machine['platform'])} |`,
    `| Load average (1 min) at start / end | ${fmt(machine['loadAverage1mAtStart'])} / ${fmt(machine['loadAverage1mAtEnd'])} |`,
    `| CPU plan | ${fmt(cores['note'])} |`,
    `| Load generator | ${fmt(obj(output['settings'])['loadGenerator'])} (each comparison side names the one it ran as \`loadGenerator\`) |`,
    `| Switchyard | ${fmt(switchyard['version'])}, store ${fmt(switchyard['store'])}, durability ${fmt(switchyard['durability'])}, measured: ${fmt(switchyard['measured'])} |`,
    '',
    '## How to reproduce',
    '',
    '```sh',
    'npm ci',
    reproduce(output),
    '# or, from a saved JSON:',
    'npm run build && node dist/bench/lib/report.js bench.json docs/performance.md',
    '```',
    '',
    '## Summary',
    '',
    `![Ratio against target per bench, and latency percentiles](${svgName})`,
  ];
  const judged = benches(output).filter(([, bench]) => !informational(bench));
  if (judged.length > 0) lines.push('', '| Bench | Metric | Switchyard | Baseline | Ratio | Target | Pass |', '|---|---|--:|--:|--:|--:|:-:|');
  for (const [name, bench] of judged) {
    if (typeof bench['error'] === 'string') {
      lines.push(`| ${name} | error: ${fmt(bench['error'])} | | | | | ✗ |`);
      continue;
    }
    const [a, b] = headline(bench);
    lines.push(`| ${name} | ${fmt(bench['metric'])} | ${a} | ${b} | ${fmt(bench['ratio'])} | ${fmt(bench['target'])} | ${bench['pass'] === true ? '✓' : '✗'} |`);
  }
  lines.push(...floorTable(output), '', '## Benches', '');
  for (const [name, bench] of benches(output)) lines.push(...benchSection(name, bench));
  return `${lines.join('\n').trimEnd()}\n`;
}

// ---- SVG ----

const WIDTH = 820;
const LABEL_WIDTH = 230;
/** Room on the right for the value printed after the longest bar. */
const PLOT_WIDTH = WIDTH - LABEL_WIDTH - 150;
const PASS_COLOR = '#2e7d32';
const FAIL_COLOR = '#c62828';
const FLOOR_COLOR = '#9e9e9e';
const PERCENTILE_COLORS: Record<string, string> = { p50: '#90caf9', p95: '#42a5f5', p99: '#1565c0' };

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function text(x: number, y: number, content: string, attrs = ''): string {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${esc(content)}</text>`;
}

interface LatencyRow {
  readonly label: string;
  readonly values: Readonly<Record<'p50' | 'p95' | 'p99', number>>;
}

function latencyRows(output: Json): LatencyRow[] {
  const rows: LatencyRow[] = [];
  const add = (label: string, value: unknown): void => {
    const l = obj(value);
    const p50 = num(l['p50']);
    const p95 = num(l['p95']);
    const p99 = num(l['p99']);
    if (p50 !== undefined && p95 !== undefined && p99 !== undefined) rows.push({ label, values: { p50, p95, p99 } });
  };
  for (const [name, bench] of benches(output)) {
    const pair = sides(bench);
    if (pair !== undefined) {
      add(`${name} ${pair.labels[0]}`, pair.a['latencyMs']);
      add(`${name} ${pair.labels[1]}`, pair.b['latencyMs']);
    }
    add(`${name} end to end`, bench['endToEndMs']);
  }
  return rows;
}

function ratioPanel(output: Json, top: number): { svg: string[]; height: number } {
  const rows = benches(output).filter(([, bench]) => num(bench['ratio']) !== undefined && !valueOnly(bench) && (num(bench['target']) !== undefined || informational(bench)));
  const floorOf = floors(output);
  const rowHeight = 30;
  const height = 50 + rows.length * rowHeight + 30;
  const max = Math.max(1, ...rows.flatMap(([, b]) => [num(b['ratio']) ?? 0, num(b['target']) ?? 0])) * 1.1;
  const x = (value: number): number => LABEL_WIDTH + (value / max) * PLOT_WIDTH;
  const title = floorOf.size > 0 ? 'Ratio (÷ baseline) against target (dashed) and the lowest floor (grey) — higher is better' : 'Ratio (Switchyard ÷ baseline) against target — higher is better';
  const svg = [text(20, top + 22, title, 'font-size="15" font-weight="bold"')];
  const plotTop = top + 40;
  for (let tick = 0; tick <= max; tick += max > 4 ? 1 : 0.25) {
    svg.push(`<line x1="${x(tick).toFixed(1)}" y1="${plotTop}" x2="${x(tick).toFixed(1)}" y2="${plotTop + rows.length * rowHeight}" stroke="#e0e0e0"/>`);
    svg.push(text(x(tick), plotTop + rows.length * rowHeight + 16, String(Math.round(tick * 100) / 100), 'font-size="11" text-anchor="middle" fill="#555"'));
  }
  rows.forEach(([name, bench], i) => {
    const y = plotTop + i * rowHeight;
    const ratio = num(bench['ratio']) ?? 0;
    svg.push(text(LABEL_WIDTH - 8, y + 19, name, 'font-size="13" text-anchor="end"'));
    if (informational(bench)) {
      svg.push(`<rect x="${LABEL_WIDTH}" y="${y + 6}" width="${Math.max(1, x(ratio) - LABEL_WIDTH).toFixed(1)}" height="18" fill="${FLOOR_COLOR}"/>`);
      svg.push(text(x(ratio) + 6, y + 19, `${ratio} (floor, no target)`, 'font-size="12"'));
      return;
    }
    const target = num(bench['target']) ?? 0;
    const floor = floorOf.get(name);
    const color = bench['pass'] === true ? PASS_COLOR : FAIL_COLOR;
    svg.push(`<rect x="${LABEL_WIDTH}" y="${y + 6}" width="${Math.max(1, x(ratio) - LABEL_WIDTH).toFixed(1)}" height="18" fill="${color}"/>`);
    if (floor !== undefined) svg.push(`<line x1="${x(floor).toFixed(1)}" y1="${y + 2}" x2="${x(floor).toFixed(1)}" y2="${y + 28}" stroke="${FLOOR_COLOR}" stroke-width="4"/>`);
    svg.push(`<line x1="${x(target).toFixed(1)}" y1="${y + 2}" x2="${x(target).toFixed(1)}" y2="${y + 28}" stroke="#000" stroke-width="2" stroke-dasharray="4 2"/>`);
    const label = floor === undefined ? `${ratio} (target ${target})` : `${ratio} (target ${target}, floor ${floor})`;
    svg.push(text(x(Math.max(ratio, target, floor ?? 0)) + 6, y + 19, label, 'font-size="12"'));
  });
  return { svg, height };
}

function latencyPanel(output: Json, top: number): { svg: string[]; height: number } {
  const rows = latencyRows(output);
  if (rows.length === 0) return { svg: [], height: 0 };
  const barHeight = 8;
  const rowHeight = 3 * barHeight + 12;
  const height = 60 + rows.length * rowHeight + 30;
  const all = rows.flatMap((r) => Object.values(r.values)).filter((v) => v > 0);
  const lo = 10 ** Math.floor(Math.log10(Math.min(...all, 1)));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...all, 10)));
  const x = (value: number): number => LABEL_WIDTH + ((Math.log10(Math.max(value, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * PLOT_WIDTH;
  const svg = [text(20, top + 22, 'Latency percentiles, ms (log scale) — lower is better', 'font-size="15" font-weight="bold"')];
  let legendX = LABEL_WIDTH;
  for (const [name, color] of Object.entries(PERCENTILE_COLORS)) {
    svg.push(`<rect x="${legendX}" y="${top + 32}" width="12" height="12" fill="${color}"/>`, text(legendX + 16, top + 42, name, 'font-size="12"'));
    legendX += 60;
  }
  const plotTop = top + 55;
  for (let tick = lo; tick <= hi; tick *= 10) {
    svg.push(`<line x1="${x(tick).toFixed(1)}" y1="${plotTop}" x2="${x(tick).toFixed(1)}" y2="${plotTop + rows.length * rowHeight}" stroke="#e0e0e0"/>`);
    svg.push(text(x(tick), plotTop + rows.length * rowHeight + 16, String(tick), 'font-size="11" text-anchor="middle" fill="#555"'));
  }
  rows.forEach((row, i) => {
    const y = plotTop + i * rowHeight;
    svg.push(text(LABEL_WIDTH - 8, y + rowHeight / 2 + 2, row.label, 'font-size="12" text-anchor="end"'));
    (['p50', 'p95', 'p99'] as const).forEach((p, j) => {
      const value = row.values[p];
      const by = y + 4 + j * barHeight;
      svg.push(`<rect x="${LABEL_WIDTH}" y="${by}" width="${Math.max(1, x(value) - LABEL_WIDTH).toFixed(1)}" height="${barHeight - 1}" fill="${PERCENTILE_COLORS[p]}"><title>${esc(`${row.label} ${p}: ${value} ms`)}</title></rect>`);
    });
    svg.push(text(x(row.values.p99) + 6, y + 4 + 3 * barHeight - 1, `${row.values.p99} ms`, 'font-size="11" fill="#333"'));
  });
  return { svg, height };
}

export function renderChart(output: Json): string {
  const ratios = ratioPanel(output, 0);
  const latencies = latencyPanel(output, ratios.height);
  const height = ratios.height + latencies.height + 10;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif">`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    ...ratios.svg,
    ...latencies.svg,
    '</svg>',
    '',
  ].join('\n');
}

// node dist/bench/lib/report.js run.json [docs/performance.md]
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const [input, target = 'docs/performance.md'] = process.argv.slice(2);
  if (input === undefined) {
    process.stderr.write('usage: node dist/bench/lib/report.js BENCH.json [REPORT.md]\n');
    process.exit(2);
  }
  const svg = writeReport(JSON.parse(readFileSync(input, 'utf8')) as Json, target);
  process.stderr.write(`wrote ${target} and ${svg}\n`);
}
