/**
 * A tiny inline SVG bar chart (no script, no external assets): completions
 * per minute over the last hour. Presentation attributes only (no style
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
const TOP = 18;
const BOTTOM = 18;

/**
 * A bar or line chart of aligned series over the same buckets, as inline SVG
 * (presentation attributes and the page's CSS classes only). Every bar or
 * point carries a <title>; the whole chart an accessible summary.
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
}): SafeHtml {
  const n = Math.max(1, o.times.length);
  const all = o.series.flatMap((s) => s.values.filter((v): v is number => v !== null));
  const max = Math.max(1, ...all);
  const slot = W / n;
  const y = (v: number) => H - BOTTOM - ((H - TOP - BOTTOM) * v) / max;
  const label = (i: number) => o.times[i]?.toISOString().slice(0, 16).replace("T", " ") ?? "";
  const marks =
    o.kind === "bar"
      ? o.series.map((s) =>
          s.values.map((v, i) =>
            v === null || v === 0
              ? ""
              : html`<rect class="${s.cls}" x="${(i * slot + 0.5).toFixed(1)}" y="${y(v).toFixed(1)}" width="${Math.max(0.8, slot - 1).toFixed(1)}" height="${(H - BOTTOM - y(v)).toFixed(1)}"><title>${label(i)}Z: ${round(v)} ${s.name}</title></rect>`,
          ),
        )
      : o.series.map((s) => {
          const pts = s.values
            .map((v, i) => (v === null ? null : `${(i * slot + slot / 2).toFixed(1)},${y(v).toFixed(1)}`))
            .filter((p): p is string => p !== null);
          const dots = s.values.map((v, i) =>
            v === null
              ? ""
              : html`<circle class="${s.cls.replace("s", "b")}" cx="${(i * slot + slot / 2).toFixed(1)}" cy="${y(v).toFixed(1)}" r="1.8"><title>${label(i)}Z: ${round(v)} ${o.unit} ${s.name}</title></circle>`,
          );
          return pts.length === 0
            ? ""
            : html`<polyline class="${s.cls}" stroke-width="1.5" points="${pts.join(" ")}"><title>${s.name}</title></polyline>${dots}`;
        });
  const legend = o.series.map(
    (s, i) =>
      html`<text x="${W - 4 - (o.series.length - 1 - i) * 90}" y="12" font-size="10" text-anchor="end" class="${s.cls.replace("s", "t")}">■ ${s.name}</text>`,
  );
  return html`<svg id="${o.id}" class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${o.title}: ${o.summary}">
<text x="4" y="12" font-size="11" font-weight="600">${o.title}</text>${legend}
<text x="4" y="${TOP + 8}" font-size="9">${round(max)} ${o.unit}</text>
<line class="axis" x1="0" y1="${H - BOTTOM}" x2="${W}" y2="${H - BOTTOM}"/>
${marks}
<text x="4" y="${H - 4}" font-size="9">${o.from}</text><text x="${W - 4}" y="${H - 4}" font-size="9" text-anchor="end">now</text>
</svg>`;
}

function round(v: number): string {
  return v >= 100 ? String(Math.round(v)) : String(Math.round(v * 10) / 10);
}

/** The four charts of a queue (or all queues): throughput, failures, depth, wait p50/p95. */
export function statsCharts(points: StatsPoint[], from: string): SafeHtml {
  const times = points.map((p) => p.t);
  const sum = (f: (p: StatsPoint) => number) => points.reduce((a, p) => a + f(p), 0);
  const peak = (f: (p: StatsPoint) => number | null) => Math.max(0, ...points.map((p) => f(p) ?? 0));
  return html`<div class="charts">
${seriesChart({ id: "chart-throughput", title: "Throughput", unit: "/bucket", kind: "bar", times, from, summary: `${sum((p) => p.completed)} completed`, series: [{ name: "completed", cls: "b3", values: points.map((p) => p.completed) }] })}
${seriesChart({ id: "chart-failures", title: "Failures", unit: "/bucket", kind: "bar", times, from, summary: `${sum((p) => p.failed)} dead, ${sum((p) => p.cancelled)} cancelled`, series: [{ name: "dead", cls: "b2", values: points.map((p) => p.failed) }] })}
${seriesChart({
  id: "chart-depth",
  title: "Depth",
  unit: "jobs",
  kind: "line",
  times,
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
  from,
  summary: `p95 peak ${round(peak((p) => p.p95))} ms`,
  series: [
    { name: "p50", cls: "s1", values: points.map((p) => p.p50) },
    { name: "p95", cls: "s2", values: points.map((p) => p.p95) },
  ],
})}
</div>`;
}
