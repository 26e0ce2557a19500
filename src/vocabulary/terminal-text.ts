/**
 * Text from files, servers and users made safe to print: a tensor name, a shard's file name or an
 * error message can hold control characters that a terminal would obey (ESC starts CSI and OSC
 * sequences that move the cursor, clear the screen or set the title; CR and LF fake lines; BEL
 * rings). Every such character is shown as a visible escape instead, so what is printed is what
 * the data says, and nothing in it can act on the terminal.
 */

/**
 * C0 controls (U+0000-U+001F), DEL, C1 controls (U+0080-U+009F; U+009B is a one-character CSI),
 * the line and paragraph separators, and the bidirectional overrides and isolates (which reorder
 * what is shown without being visible).
 */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_KEEP_LINES = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function escapeOne(c: string): string {
  const code = c.charCodeAt(0);
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * `text` with every control character written as an escape (`\x1b`, `\n`, `\x9b`, `\u202e`).
 * With `keepLines`, LF stays a line break (for messages of several lines); CR is escaped always.
 */
export function terminalText(text: string, options: { keepLines?: boolean } = {}): string {
  return String(text).replace(options.keepLines ? UNSAFE_KEEP_LINES : UNSAFE, escapeOne);
}

/** Whether `text` holds a character {@link terminalText} would escape. */
export function hasControlCharacters(text: string): boolean {
  UNSAFE.lastIndex = 0;
  const found = UNSAFE.test(text);
  UNSAFE.lastIndex = 0;
  return found;
}

/** Characters JSON.stringify leaves raw that a terminal may still obey or that break lines. */
const JSON_RAW = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * `JSON.stringify(value, null, indent)` with DEL, the C1 controls, the line separators and the
 * bidirectional controls written as `\uXXXX` as well (JSON.stringify escapes only C0). Such
 * characters occur only inside strings, so the result parses to the same value.
 */
export function terminalJson(value: unknown, indent = 2): string {
  return JSON.stringify(value, null, indent).replace(JSON_RAW, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
