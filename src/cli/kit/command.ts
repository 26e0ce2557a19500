/**
 * What a `penstock` command is, as data: its usage, description, options and exit statuses. The
 * command line is parsed from this description, and every help page and docs/cli.md are drawn
 * from it, so the three cannot disagree.
 */
import { suggest } from '../../settings/config.js';
import { terminalText } from '../../vocabulary/terminal-text.js';
import { ArgError } from './args.js';

/** One option of a command. */
export interface OptionSpec {
  /** The long name, without dashes: `device` for `--device`. */
  readonly name: string;
  /** A one-letter alias, without the dash. */
  readonly short?: string;
  /** For an option that takes a value: what the value is called in help (`N`, `SIZE`). */
  readonly value?: string;
  /** What the option does, in one or two sentences. */
  readonly help: string;
  /** It may be given several times; every value is kept, in order, in {@link ParsedLine.all}. */
  readonly repeatable?: boolean;
}

/** Options parsed from a command line: strings for options with a value, `true` for flags. */
export interface ParsedLine {
  /** Each option given, by long name (the last one wins when it is given twice). */
  readonly values: Readonly<Record<string, string | true | undefined>>;
  /** The operands, in order. */
  readonly positionals: readonly string[];
  /** Every value of each repeatable option, in the order given. */
  readonly all?: Readonly<Record<string, readonly string[]>>;
}

/** The function behind a command: given its parsed command line, resolves to the exit status. */
export type CommandMain = (line: ParsedLine) => Promise<number>;

/** One command, as the table in `commands.ts` describes it. */
export interface CommandSpec {
  /** The name typed after `penstock`. */
  readonly name: string;
  /** One line for the list of commands. */
  readonly summary: string;
  /** Usage lines, each without the leading `penstock <name> `. */
  readonly usage: readonly string[];
  /** Paragraphs (separated by blank lines) explaining the command. */
  readonly description: string;
  /** The options, in the order help shows them (`-h, --help` is added to every command). */
  readonly options: readonly OptionSpec[];
  /** Operands: the most the command takes (default: none). */
  readonly maxOperands?: number;
  /** Exit statuses beyond 0, 1 and 2 (and the signal statuses), with their meaning here. */
  readonly exits?: Readonly<Record<number, string>>;
  /** Example command lines, shown after the options. */
  readonly examples?: readonly string[];
  /** Loads the command's code (only when it runs). */
  readonly load: () => Promise<CommandMain>;
  /**
   * Work started before the command's code loads, from its parsed line: a fresh process makes
   * the GPU's context while the rest of penstock is imported. Resolves once the work has started
   * (not finished), so that it starts before that import rather than racing it. Never rejects.
   */
  readonly early?: (line: ParsedLine) => Promise<void>;
}

/** The exit statuses every command shares. */
export const COMMON_EXITS: Readonly<Record<number, string>> = {
  0: 'success',
  1: 'failure: the command ran and something failed (the message says what)',
  2: 'usage error: the command line was wrong and nothing was done',
  130: 'stopped by SIGINT (Ctrl-C); temporary files were removed',
  143: 'stopped by SIGTERM; temporary files were removed',
};

const HELP_OPTION: OptionSpec = { name: 'help', short: 'h', help: 'show this help and exit' };

/** Every option of a command, `--help` included. */
export function allOptions(spec: CommandSpec): OptionSpec[] {
  return [...spec.options, HELP_OPTION];
}

/**
 * Parses `argv` against `spec`: `--name value`, `--name=value`, `-x`, and `--` to end the options.
 * An unknown option or a missing value throws {@link ArgError}, naming the nearest known option.
 */
export function parseLine(spec: CommandSpec, argv: readonly string[]): ParsedLine {
  const options = allOptions(spec);
  const values: Record<string, string | true | undefined> = {};
  const all: Record<string, string[]> = {};
  const positionals: string[] = [];
  const byShort = new Map(options.filter((o) => o.short).map((o) => [o.short!, o]));
  const byName = new Map(options.map((o) => [o.name, o]));
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const long = arg.startsWith('--');
    const eq = long ? arg.indexOf('=') : -1;
    const key = long ? arg.slice(2, eq < 0 ? undefined : eq) : arg.slice(1);
    const option = long ? byName.get(key) : byShort.get(key);
    if (!option) throw unknownOption(spec, arg.slice(0, eq < 0 ? undefined : eq), options);
    if (option.value === undefined) {
      if (eq >= 0) throw new ArgError(`--${option.name} takes no value, got '${terminalText(arg)}'`);
      values[option.name] = true;
      continue;
    }
    let value: string | undefined;
    if (eq >= 0) value = arg.slice(eq + 1);
    else if (i + 1 < argv.length) value = argv[++i];
    if (value === undefined) throw new ArgError(`--${option.name} needs a value (${option.value})`);
    values[option.name] = value;
    if (option.repeatable) (all[option.name] ??= []).push(value);
  }
  if (!values.help && positionals.length > (spec.maxOperands ?? 0)) {
    const extra = positionals.slice(spec.maxOperands ?? 0).map((p) => `'${terminalText(p)}'`).join(' ');
    throw new ArgError(spec.maxOperands ? `too many operands: ${extra}` : `takes no operands, got ${extra}`);
  }
  return { values, positionals, all };
}

function unknownOption(spec: CommandSpec, given: string, options: readonly OptionSpec[]): ArgError {
  const names = options.map((o) => `--${o.name}`);
  const near = suggest(given.startsWith('--') ? given : `-${given}`, names);
  const shown = terminalText(given);
  return new ArgError(`unknown option '${shown}'${near ? ` (did you mean '${near}'?)` : ''} for 'penstock ${spec.name}'`);
}

/** Help text is kept inside this many columns. */
export const HELP_WIDTH = 79;

/** `text` broken into lines of at most `width` characters (words longer than that stay whole). */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

function optionLabel(o: OptionSpec): string {
  return `${o.short ? `-${o.short}, ` : ''}--${o.name}${o.value ? ` ${o.value}` : ''}${o.repeatable ? '...' : ''}`;
}

/** Two-column text (a label, then its wrapped explanation), indented by two spaces. */
export function columns(rows: readonly (readonly [string, string])[], width = HELP_WIDTH): string[] {
  const labelWidth = Math.min(24, Math.max(...rows.map(([l]) => l.length)));
  const lines: string[] = [];
  for (const [label, text] of rows) {
    const body = wrap(text, width - labelWidth - 4);
    if (label.length > labelWidth) lines.push(`  ${label}`);
    else lines.push(`  ${label.padEnd(labelWidth)}  ${body.shift() ?? ''}`.trimEnd());
    for (const b of body) lines.push(`  ${' '.repeat(labelWidth)}  ${b}`);
  }
  return lines;
}

/** The exit statuses a command can end with, shared ones and its own, in order. */
export function exitsOf(spec: CommandSpec): [number, string][] {
  const all = { ...COMMON_EXITS, ...spec.exits };
  return Object.entries(all)
    .map(([k, v]) => [Number(k), v] as [number, string])
    .sort((a, b) => a[0] - b[0]);
}

/** The full help page of one command (`penstock help <name>`, `penstock <name> --help`). */
export function helpPage(spec: CommandSpec): string {
  const out: string[] = [];
  spec.usage.forEach((u, i) => out.push(`${i === 0 ? 'Usage: ' : '       '}penstock ${spec.name}${u ? ` ${u}` : ''}`));
  out.push('');
  for (const para of spec.description.split(/\n\s*\n/)) out.push(...wrap(para, HELP_WIDTH), '');
  out.push('Options:', ...columns(allOptions(spec).map((o) => [optionLabel(o), o.help])), '');
  if (spec.examples?.length) out.push('Examples:', ...spec.examples.map((e) => `  ${e}`), '');
  out.push('Exit status:', ...columns(exitsOf(spec).map(([k, v]) => [String(k), v])));
  return out.join('\n') + '\n';
}
