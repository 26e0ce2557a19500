/**
 * A strict JSON reader for tensor headers. `JSON.parse` keeps the last of two equal keys
 * silently; a header with a tensor named twice must be refused instead, so objects are read
 * here with duplicate keys reported. Objects come back with a null prototype, so names such as
 * `__proto__` or `constructor` are plain keys.
 */

/** Why the text is not acceptable JSON: a syntax error, a duplicate key, or nesting past the limit. */
export class StrictJsonError extends Error {
  readonly kind: 'syntax' | 'duplicate' | 'depth';
  /** The duplicated key, for `duplicate`. */
  readonly key?: string;
  /** Nesting depth of the object holding the duplicate (1: the top-level object). */
  readonly depth?: number;
  constructor(kind: 'syntax' | 'duplicate' | 'depth', message: string, key?: string, depth?: number) {
    super(message);
    this.kind = kind;
    if (key !== undefined) this.key = key;
    if (depth !== undefined) this.depth = depth;
  }
}

/**
 * A JSON value as read here. Non-negative integers that are exactly representable come back as
 * plain numbers; every other number as a {@link JsonNumber} with its source text, so that
 * `2.0`, `-1` or `18446744073709551615` can never pass for an index.
 */
export type JsonValue = null | boolean | string | number | JsonNumber | JsonValue[] | { [key: string]: JsonValue };

/** A number that is not an exact non-negative integer, with its source text. */
export interface JsonNumber {
  readonly kind: 'number';
  readonly value: number;
  readonly text: string;
}

/** Whether a value is a number read by {@link parseStrictJson}. */
export function isJsonNumber(v: unknown): v is JsonNumber {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === numberProto;
}

const numberProto = {};

/** Reads `text` as JSON; throws {@link StrictJsonError}. Leading and trailing whitespace is allowed. */
export function parseStrictJson(text: string, maxDepth = 64): JsonValue {
  return parsePlainJson(text, maxDepth) ?? readStrictly(text, maxDepth);
}

/**
 * The common case at `JSON.parse` speed (a header of 15 000 tensors in a few milliseconds rather
 * than tens): text whose numbers are all short non-negative integers and whose nesting is within
 * the limit, read by `JSON.parse`, then checked to have lost no duplicate key (its keys counted
 * against the colons outside strings) and given null prototypes. Undefined for anything else —
 * other numbers, invalid text, a duplicate — which the strict reader then reads or refuses.
 */
function parsePlainJson(text: string, maxDepth: number): JsonValue | undefined {
  const colons = plainShape(text, maxDepth);
  if (colons === undefined) return undefined;
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch {
    return undefined;
  }
  let keys = 0;
  const stack: unknown[] = [root];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v !== 'object' || v === null) continue;
    if (Array.isArray(v)) {
      for (const x of v) if (typeof x === 'object' && x !== null) stack.push(x);
      continue;
    }
    Object.setPrototypeOf(v, null);
    for (const k in v) {
      keys++;
      const x = (v as Record<string, unknown>)[k];
      if (typeof x === 'object' && x !== null) stack.push(x);
    }
  }
  return keys === colons ? (root as JsonValue) : undefined;
}

/**
 * Colons outside strings (one per key in valid JSON), or undefined where the text has a number
 * that is not a short non-negative integer or nests deeper than `maxDepth`.
 */
function plainShape(text: string, maxDepth: number): number | undefined {
  const n = text.length;
  let colons = 0;
  let depth = 0;
  let digits = 0;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = i + 1;
      for (;;) {
        j = text.indexOf('"', j);
        if (j < 0) return undefined;
        let back = 0;
        while (text.charCodeAt(j - 1 - back) === 0x5c) back++;
        if (back % 2 === 0) break;
        j++;
      }
      i = j + 1;
      digits = 0;
      continue;
    }
    if (c >= 0x30 && c <= 0x39) {
      // 15 digits stay below 2^53: every such integer is exact.
      if (++digits > 15) return undefined;
      i++;
      continue;
    }
    digits = 0;
    if (c === 0x3a) colons++;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return undefined;
    } else if (c === 0x7d || c === 0x5d) depth--;
    else if (c === 0x74 || c === 0x6e) i += 3; // true, null (JSON.parse checks the letters)
    else if (c === 0x66) i += 4; // false
    else if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09 && c !== 0x2c) return undefined; // '-', '.', 'e': not a plain integer
    i++;
  }
  return colons;
}

function readStrictly(text: string, maxDepth: number): JsonValue {
  let i = 0;
  const n = text.length;
  const fail = (what: string): never => {
    throw new StrictJsonError('syntax', `${what} at character ${i}`);
  };
  const ws = () => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
  };
  const plainRun = /[^"\\\x00-\x1f]*/y;
  const numberRe = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
  const str = (): string => {
    // Caller saw the opening quote. Fast path: a run without escapes up to the closing quote.
    i++;
    plainRun.lastIndex = i;
    plainRun.exec(text);
    if (text.charCodeAt(plainRun.lastIndex) === 0x22) {
      const s = text.slice(i, plainRun.lastIndex);
      i = plainRun.lastIndex + 1;
      return s;
    }
    let out = '';
    let start = i;
    for (;;) {
      if (i >= n) fail('Unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        out += text.slice(start, i);
        i++;
        return out;
      }
      if (c < 0x20) fail('Control character in string');
      if (c === 0x5c) {
        out += text.slice(start, i);
        const e = text[i + 1];
        i += 2;
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            const hex = text.slice(i, i + 4);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('Bad \\u escape');
            out += String.fromCharCode(parseInt(hex, 16));
            i += 4;
            break;
          }
          default:
            i -= 2;
            fail('Bad escape');
        }
        start = i;
        continue;
      }
      i++;
    }
  };
  const num = (): number | JsonNumber => {
    numberRe.lastIndex = i;
    const m = numberRe.exec(text);
    if (!m || m[0].length === 0) fail('Unexpected character');
    const t = m![0];
    i += t.length;
    if (t.charCodeAt(0) !== 0x2d && !/[.eE]/.test(t)) {
      const exact = Number(t);
      if (Number.isSafeInteger(exact)) return exact;
    }
    const v = Object.create(numberProto) as { kind: 'number'; value: number; text: string };
    v.kind = 'number';
    v.value = Number(t);
    v.text = t;
    return Object.freeze(v);
  };
  const value = (depth: number): JsonValue => {
    ws();
    if (i >= n) fail('Unexpected end');
    const c = text[i];
    if (c === '{') {
      if (depth >= maxDepth) throw new StrictJsonError('depth', `JSON nested deeper than ${maxDepth} levels`);
      i++;
      const obj = Object.create(null) as { [key: string]: JsonValue };
      ws();
      if (text[i] === '}') {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('Expected a string key');
        const key = str();
        // A null-prototype object: `in` sees only keys already read.
        if (key in obj) throw new StrictJsonError('duplicate', `Duplicate key ${JSON.stringify(key)}`, key, depth + 1);
        ws();
        if (text[i] !== ':') fail("Expected ':'");
        i++;
        obj[key] = value(depth + 1);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return obj;
        }
        fail("Expected ',' or '}'");
      }
    }
    if (c === '[') {
      if (depth >= maxDepth) throw new StrictJsonError('depth', `JSON nested deeper than ${maxDepth} levels`);
      i++;
      const arr: JsonValue[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value(depth + 1));
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return arr;
        }
        fail("Expected ',' or ']'");
      }
    }
    if (c === '"') return str();
    if (text.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (text.startsWith('false', i)) {
      i += 5;
      return false;
    }
    if (text.startsWith('null', i)) {
      i += 4;
      return null;
    }
    return num();
  };
  const v = value(0);
  ws();
  if (i !== n) fail('Unexpected text after the JSON value');
  return v;
}

/** Whether a value is a JSON object as read here. */
export function isJsonObject(v: JsonValue | undefined): v is { [key: string]: JsonValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !isJsonNumber(v);
}

/** The value of a JSON number when it is a non-negative integer that is exactly representable. */
export function exactIndex(v: JsonValue | undefined): number | undefined {
  return typeof v === 'number' ? v : undefined;
}
