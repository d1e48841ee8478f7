import { useEffect } from 'preact/hooks';
import { api } from '../api.js';
import type { Route } from '../route.js';
import { formatClock, timeZoneName } from '../time.js';
import { ErrorMessage, PageTitle, useLoad } from '../ui.js';

interface Traffic {
  readonly from: string;
  readonly to: string;
  readonly minutes: string[];
  readonly messages: { total: number; byStatus: Record<string, number[]> };
  readonly deliveries: { total: number; byOutcome: Record<string, number[]> };
}

const REFRESH_MS = 30_000;
/** One colour per series, the same on every chart; each has AA contrast against white. */
const COLOURS: Readonly<Record<string, string>> = {
  accepted: '#146c2e',
  succeeded: '#146c2e',
  rejected: '#b3261e',
  failed: '#b3261e',
  duplicate: '#8a4b00',
  retried: '#8a4b00',
  suppressed: '#5b3c99',
  filtered: '#0b57d0',
  blocked: '#4a4a4a',
};

export function OverviewPage(_props: { route: Route }) {
  const { value, error, reload } = useLoad(() => api<Traffic>('GET', '/overview/traffic?minutes=60'), []);
  useEffect(() => {
    const timer = setInterval(reload, REFRESH_MS);
    return () => clearInterval(timer);
  }, [reload]);
  return (
    <section aria-labelledby="page-title">
      <PageTitle>Overview</PageTitle>
      <p class="hint">The last hour, per minute, counted by every node sharing this store. Refreshes every 30 seconds.</p>
      <ErrorMessage error={error} />
      {value !== undefined && value.messages.total === 0 && (
        <p>
          No messages in the last hour. Send an event with a source's write key (<a href="#/debugger">how to send one</a>).
        </p>
      )}
      {value !== undefined && (
        <div class="charts">
          <Chart id="messages" title="Messages received" unit="messages" minutes={value.minutes} series={value.messages.byStatus} total={value.messages.total} />
          <Chart
            id="deliveries"
            title="Deliveries by outcome"
            unit="delivery rounds"
            minutes={value.minutes}
            series={value.deliveries.byOutcome}
            total={value.deliveries.total}
          />
        </div>
      )}
    </section>
  );
}

const WIDTH = 600;
const HEIGHT = 200;
const LEFT = 40;
const BOTTOM = 20;
/** Room above the plot for the top label. */
const TOP = 10;

/** A stacked bar chart, one bar a minute, with the same numbers in a table for screen readers. */
function Chart({ id, title, unit, minutes, series, total }: { id: string; title: string; unit: string; minutes: string[]; series: Record<string, number[]>; total: number }) {
  const names = Object.keys(series);
  const sums = minutes.map((_, i) => names.reduce((sum, name) => sum + (series[name]?.[i] ?? 0), 0));
  const peak = Math.max(1, ...sums);
  const plotWidth = WIDTH - LEFT;
  const plotHeight = HEIGHT - BOTTOM - TOP;
  const barWidth = plotWidth / Math.max(1, minutes.length);
  const y = (value: number): number => TOP + plotHeight - (value / peak) * plotHeight;
  const totals = names.map((name) => `${(series[name] ?? []).reduce((a, b) => a + b, 0)} ${name}`).join(', ');
  return (
    <figure class="chart" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>
        {title}: {total}
      </h2>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={`${title} per minute over the last hour (times in ${timeZoneName()}): ${total} ${unit} (${totals})`}>
        <line x1={LEFT} y1={y(0)} x2={WIDTH} y2={y(0)} stroke="#6b7684" />
        {[0, 0.5, 1].map((share) => (
          <g key={share}>
            <line x1={LEFT} x2={WIDTH} y1={y(peak * share)} y2={y(peak * share)} stroke="#e3e7eb" />
            <text x={LEFT - 4} y={y(peak * share) + 4} text-anchor="end" font-size="11" fill="#4a5361">
              {Math.round(peak * share)}
            </text>
          </g>
        ))}
        {minutes.map((minute, i) => {
          let base = 0;
          return (
            <g key={minute}>
              {names.map((name) => {
                const value = series[name]?.[i] ?? 0;
                if (value === 0) return null;
                const top = base + value;
                const rect = (
                  <rect key={name} x={LEFT + i * barWidth + 0.5} width={Math.max(1, barWidth - 1)} y={y(top)} height={y(base) - y(top)} fill={COLOURS[name] ?? '#4a5361'}>
                    <title>
                      {formatClock(minute)}: {value} {name}
                    </title>
                  </rect>
                );
                base = top;
                return rect;
              })}
              {i % 10 === 0 && (
                <text x={LEFT + i * barWidth} y={HEIGHT - 4} font-size="11" fill="#4a5361">
                  {formatClock(minute)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <ul class="legend">
        {names.map((name) => (
          <li key={name}>
            <span class="swatch" style={{ background: COLOURS[name] ?? '#4a5361' }} />
            {name}: {(series[name] ?? []).reduce((a, b) => a + b, 0)}
          </li>
        ))}
      </ul>
      <details>
        <summary>{title} as a table</summary>
        <table tabIndex={0}>
          <caption class="visually-hidden">
            {title} per minute, minutes with none left out
          </caption>
          <thead>
            <tr>
              <th scope="col">Minute ({timeZoneName()})</th>
              {names.map((name) => (
                <th scope="col" key={name}>
                  {name}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {minutes.map((minute, i) =>
              sums[i] === 0 ? null : (
                <tr key={minute}>
                  <td>{formatClock(minute)}</td>
                  {names.map((name) => (
                    <td key={name}>{series[name]?.[i] ?? 0}</td>
                  ))}
                </tr>
              ),
            )}
          </tbody>
        </table>
      </details>
    </figure>
  );
}
