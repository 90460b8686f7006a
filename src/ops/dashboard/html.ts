/**
 * HTML escaping for the dashboard. Every value interpolated into `html`…``
 * is escaped unless it is already `SafeHtml` (the output of `html` itself or
 * of `raw` on a literal the code wrote). Nothing from the database, the URL
 * or a form ever reaches a page unescaped: that is this file's one job.
 */

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
  "`": "&#96;",
};

/** Escapes text for element content and quoted attribute values. */
export function escapeHtml(value: unknown): string {
  const text = value === null || value === undefined ? "" : String(value);
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c] as string);
}

/** Markup that is already safe (built by `html`, or a literal passed to `raw`). */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

/** Marks markup the code itself wrote as safe. Never pass data to it. */
export function raw(markup: string): SafeHtml {
  return new SafeHtml(markup);
}

function render(value: unknown): string {
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join("");
  if (value === false || value === null || value === undefined) return "";
  return escapeHtml(value);
}

/** A template tag: interpolations are escaped, arrays are joined, false/null/undefined render as nothing. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0] ?? "";
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? "");
  return new SafeHtml(out);
}
