/**
 * The dashboard's charts as inline SVG (no script, no external assets): a
 * queue's throughput, failures, depth and wait from the rollup's series, with
 * axes, and gaps where there is no data; and the older per-minute throughput
 * bars. Presentation attributes and the page's CSS classes only (no style
 * attributes), so the page's Content-Security-Policy stays strict.
 */
import type { StatsPoint } from "../adminTypes.js";
import { html, type SafeHtml } from "./html.js";

export function throughputChart(perMinute: readonly number[], label: string): SafeHtml {
  const width = 600;
  const height = 120;
  const top = 14;
  const bottom = 16;
  const max = Math.max(1, ...perMinute);
  const slot = width / Math.max(1, perMinute.length);
  const total = perMinute.reduce((a, b) => a + b, 0);
  const bars = perMinute.map((n, i) => {
    const h = ((height - top - bottom) * n) / max;
    const minutesAgo = perMinute.length - 1 - i;
    return html`<rect x="${(i * slot + 1).toFixed(1)}" y="${(height - bottom - h).toFixed(1)}" width="${Math.max(1, slot - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="#3b82f6"><title>${n} completed ${minutesAgo === 0 ? "this minute" : `${minutesAgo} min ago`}</title></rect>`;
  });
  return html`<svg class="chart" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${label}: ${total} in the last hour">
<text x="0" y="10" font-size="10" fill="#555">${label} · peak ${max}/min · ${total} in the last hour</text>
<line x1="0" y1="${height - bottom}" x2="${width}" y2="${height - bottom}" stroke="#bbb"/>
${bars}
<text x="0" y="${height - 3}" font-size="10" fill="#555">60 min ago</text>
<text x="${width}" y="${height - 3}" font-size="10" fill="#555" text-anchor="end">now</text>
</svg>`;
}

interface Series {
  name: string;
  /** CSS class: b1–b3 (bars) or s1–s2 (lines). */
  cls: string;
  values: Array<number | null>;
}

const W = 480;
const H = 150;
const TOP = 20;
const BOTTOM = 18;
/** Room for the y axis' labels. */
const LEFT = 34;
const RIGHT = 6;

/** An axis label's UTC text: "09:14Z" over less than 20 h, "01-31 09:14Z" over more (the script shows it local). */
function axisTime(d: Date, withDate: boolean): string {
  const iso = d.toISOString();
  return `${withDate ? `${iso.slice(5, 10)} ` : ""}${iso.slice(11, 16)}Z`;
}

/**
 * A bar or line chart of aligned series over the same buckets, as inline SVG
 * (presentation attributes and the page's CSS classes only). A y axis with
 * its 0 and its maximum, a zero line, the first and last bucket's times on
 * the x axis (`data-datetime`: the page's script shows them local). A bucket
 * with no data (`known` false) is a gap: a shaded band, no bar and no line
 * through it; a zero is a flat mark on the zero line. Every bar or point
 * carries a <title>; the whole chart an accessible summary.
 */
export function seriesChart(o: {
  id: string;
  title: string;
  unit: string;
  kind: "bar" | "line";
  times: Date[];
  series: Series[];
  from: string;
  summary: string;
  /** Per bucket: whether it has data at all. Default: every bucket does. */
  known?: boolean[];
}): SafeHtml {
  const n = Math.max(1, o.times.length);
  const known = (i: number) => o.known?.[i] ?? true;
  const all = o.series.flatMap((s) => s.values.filter((v, i): v is number => v !== null && known(i)));
  const max = Math.max(1, ...all);
  const base = H - BOTTOM;
  const slot = (W - LEFT - RIGHT) / n;
  const x = (i: number) => LEFT + i * slot;
  const y = (v: number) => base - ((base - TOP) * v) / max;
  const label = (i: number) => o.times[i]?.toISOString().slice(0, 16).replace("T", " ") ?? "";
  const gaps: SafeHtml[] = [];
  for (let i = 0; i < o.times.length; i++) {
    if (known(i)) continue;
    let j = i;
    while (j + 1 < o.times.length && !known(j + 1)) j++;
    gaps.push(
      html`<rect class="gap" x="${x(i).toFixed(1)}" y="${TOP}" width="${((j - i + 1) * slot).toFixed(1)}" height="${base - TOP}"><title>No data ${label(i)}Z – ${label(j)}Z</title></rect>`,
    );
    i = j;
  }
  const marks =
    o.kind === "bar"
      ? o.series.map((s) =>
          s.values.map((v, i) => {
            if (v === null || !known(i)) return "";
            const top = v === 0 ? base - 1.5 : y(v);
            return html`<rect class="${s.cls}${v === 0 ? " zero" : ""}" x="${(x(i) + 0.5).toFixed(1)}" y="${top.toFixed(1)}" width="${Math.max(0.8, slot - 1).toFixed(1)}" height="${(base - top).toFixed(1)}"><title>${label(i)}Z: ${round(v)} ${s.name}</title></rect>`;
          }),
        )
      : o.series.map((s) => {
          // One polyline per run of buckets with a value: a gap stays a gap.
          const runs: string[][] = [[]];
          s.values.forEach((v, i) => {
            if (v === null || !known(i)) {
              if ((runs.at(-1) as string[]).length > 0) runs.push([]);
            } else (runs.at(-1) as string[]).push(`${(x(i) + slot / 2).toFixed(1)},${y(v).toFixed(1)}`);
          });
          const dots = s.values.map((v, i) =>
            v === null || !known(i)
              ? ""
              : html`<circle class="${s.cls.replace("s", "b")}" cx="${(x(i) + slot / 2).toFixed(1)}" cy="${y(v).toFixed(1)}" r="1.8"><title>${label(i)}Z: ${round(v)} ${o.unit} ${s.name}</title></circle>`,
          );
          return html`${runs
            .filter((r) => r.length > 1)
            .map(
              (r) =>
                html`<polyline class="${s.cls}" stroke-width="1.5" points="${r.join(" ")}"><title>${s.name}</title></polyline>`,
            )}${dots}`;
        });
  const legend = o.series.map(
    (s, i) =>
      html`<text x="${W - 4 - (o.series.length - 1 - i) * 90}" y="12" font-size="10" text-anchor="end" class="${s.cls.replace("s", "t")}">■ ${s.name}</text>`,
  );
  const first = o.times[0];
  const last = o.times.at(-1);
  const withDate = first !== undefined && last !== undefined && last.getTime() - first.getTime() >= 20 * 3_600_000;
  const unknown = o.times.filter((_, i) => !known(i)).length;
  return html`<svg id="${o.id}" class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${o.title}: ${o.summary}${unknown > 0 ? `; no data for ${unknown} of ${o.times.length} buckets` : ""}">
<text x="4" y="12" font-size="11" font-weight="600">${o.title} <tspan font-weight="400" font-size="9">(${o.unit})</tspan></text>${legend}
${gaps}
<line class="axis grid" x1="${LEFT}" y1="${TOP}" x2="${W - RIGHT}" y2="${TOP}" stroke-dasharray="2 3"/>
<line class="axis" x1="${LEFT}" y1="${TOP}" x2="${LEFT}" y2="${base}"/><line class="axis zero-line" x1="${LEFT}" y1="${base}" x2="${W - RIGHT}" y2="${base}"/>
<text class="y-max" x="${LEFT - 3}" y="${TOP + 3}" font-size="9" text-anchor="end">${round(max)}</text><text class="y-zero" x="${LEFT - 3}" y="${base + 3}" font-size="9" text-anchor="end">0</text>
${marks}
${first ? html`<text class="x-start" x="${LEFT}" y="${H - 4}" font-size="9" data-datetime="${first.toISOString()}">${axisTime(first, withDate)}</text>` : ""}
<text x="${(LEFT + W - RIGHT) / 2}" y="${H - 4}" font-size="9" text-anchor="middle">${o.from} → now</text>
${last ? html`<text class="x-end" x="${W - RIGHT}" y="${H - 4}" font-size="9" text-anchor="end" data-datetime="${last.toISOString()}">${axisTime(last, withDate)}</text>` : ""}
</svg>`;
}

function round(v: number): string {
  return v >= 100 ? String(Math.round(v)) : String(Math.round(v * 10) / 10);
}

/** The four charts of a queue (or all queues): throughput, failures, depth, wait p50/p95. */
export function statsCharts(points: StatsPoint[], from: string): SafeHtml {
  const times = points.map((p) => p.t);
  const known = points.map((p) => p.rolledUp);
  const stepMinutes =
    points.length > 1 ? ((points[1] as StatsPoint).t.getTime() - (points[0] as StatsPoint).t.getTime()) / 60_000 : 1;
  const perBucket = `jobs per ${stepMinutes === 1 ? "minute" : stepMinutes === 60 ? "hour" : `${stepMinutes} min`}`;
  const sum = (f: (p: StatsPoint) => number) => points.reduce((a, p) => a + f(p), 0);
  const peak = (f: (p: StatsPoint) => number | null) => Math.max(0, ...points.map((p) => f(p) ?? 0));
  return html`<div class="charts">
${seriesChart({ id: "chart-throughput", title: "Throughput", unit: perBucket, kind: "bar", times, known, from, summary: `${sum((p) => p.completed)} completed`, series: [{ name: "completed", cls: "b3", values: points.map((p) => p.completed) }] })}
${seriesChart({ id: "chart-failures", title: "Failures", unit: perBucket, kind: "bar", times, known, from, summary: `${sum((p) => p.failed)} dead, ${sum((p) => p.cancelled)} cancelled`, series: [{ name: "dead", cls: "b2", values: points.map((p) => p.failed) }] })}
${seriesChart({
  id: "chart-depth",
  title: "Depth",
  unit: "jobs",
  kind: "line",
  times,
  known,
  from,
  summary: `peak ${peak((p) => p.depth)} runnable, ${peak((p) => p.running)} running`,
  series: [
    { name: "runnable", cls: "s1", values: points.map((p) => p.depth) },
    { name: "running", cls: "s2", values: points.map((p) => p.running) },
  ],
})}
${seriesChart({
  id: "chart-wait",
  title: "Wait",
  unit: "ms",
  kind: "line",
  times,
  known,
  from,
  summary: `p95 peak ${round(peak((p) => p.p95))} ms`,
  series: [
    { name: "p50", cls: "s1", values: points.map((p) => p.p50) },
    { name: "p95", cls: "s2", values: points.map((p) => p.p95) },
  ],
})}
</div>`;
}
