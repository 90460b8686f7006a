/**
 * What reaches the operator's terminal. Job errors, keys, queue and kind
 * names, log lines and results come from the database, where anyone who can
 * write a row put them: an ESC or OSC sequence in them would retitle the
 * terminal, clear the screen or hide text. Every command prints through these
 * helpers, so no C0 or C1 control character (nor a bidirectional override)
 * from data reaches the terminal: each is shown as an escape (`\x1b`,
 * `\u202e`). Newlines are kept where the layout has room for them (free text);
 * a table cell gets them escaped too. JSON output stays valid JSON.
 */

/** C0 controls but newline, DEL, C1 controls, and the bidirectional overrides and isolates. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's job.
const CONTROLS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's job.
const CONTROLS_AND_NEWLINE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
/** What JSON.stringify leaves raw of the above (it escapes C0 itself). */
const JSON_RAW_CONTROLS = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

const hex = (c: string, width: number) => (c.codePointAt(0) as number).toString(16).padStart(width, "0");
const escaped = (c: string) => (c.charCodeAt(0) <= 0xff ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`);

/** `text` with every control character shown as an escape; newlines kept unless `newlines` is false. */
export function terminalText(text: string, options: { newlines?: boolean } = {}): string {
  return text.replace(options.newlines === false ? CONTROLS_AND_NEWLINE : CONTROLS, escaped);
}

/** JSON text with the controls JSON.stringify leaves raw written as \u escapes: the same JSON value. */
export function terminalJson(json: string): string {
  return json.replace(JSON_RAW_CONTROLS, (c) => `\\u${hex(c, 4)}`);
}

/** Writes free text to stdout, control characters shown as escapes (newlines kept). */
export function print(text: string): void {
  process.stdout.write(terminalText(text));
}

/** Writes free text to stderr, control characters shown as escapes (newlines kept). */
export function printError(text: string): void {
  process.stderr.write(terminalText(text));
}
