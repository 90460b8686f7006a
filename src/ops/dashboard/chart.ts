/**
 * A tiny inline SVG bar chart (no script, no external assets): completions
 * per minute over the last hour. Presentation attributes only (no style
 * attributes), so the page's Content-Security-Policy stays strict.
 */
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
