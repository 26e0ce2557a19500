/**
 * `penstock help` and docs/cli.md, both drawn from the command table: the list of commands, every
 * exit status any command can end with, and each command's full help page.
 */
import { COMMANDS, SHARED_OPTIONS } from './commands.js';
import { COMMON_EXITS, columns, helpPage, type CommandSpec } from './kit/command.js';

/** Every exit status of every command, each with what it means and where. */
export function allExits(commands: readonly CommandSpec[] = COMMANDS): [number, string][] {
  const byCode = new Map<number, string[]>();
  for (const [k, v] of Object.entries(COMMON_EXITS)) byCode.set(Number(k), [v]);
  for (const c of commands)
    for (const [k, v] of Object.entries(c.exits ?? {})) {
      const code = Number(k);
      if (Object.hasOwn(COMMON_EXITS, k)) continue;
      byCode.set(code, [...(byCode.get(code) ?? []), v.startsWith('--') ? `${c.name} ${v}` : `${c.name}: ${v}`]);
    }
  return [...byCode.entries()].sort((a, b) => a[0] - b[0]).map(([k, v]) => [k, v.join('; ')]);
}

/** `penstock --help`. */
export function mainHelp(commands: readonly CommandSpec[] = COMMANDS): string {
  const out = [
    'penstock: move file data straight between storage and GPU memory',
    '',
    'Usage: penstock <command> [options]',
    '',
    'Commands:',
    ...columns([...commands.map((c) => [c.name, c.summary] as [string, string]), ['help [COMMAND]', "this text, or a command's help page"]]),
    '',
    'Run "penstock help <command>" or "penstock <command> --help" for its options.',
    '',
    'Options:',
    ...columns([
      ['-h, --help', 'this text'],
      ['-V, --version', 'the version of penstock'],
    ]),
    '',
    'The same option means the same thing in every command:',
    ...columns(Object.values(SHARED_OPTIONS).map((o) => [`--${o.name}${'value' in o ? ` ${o.value}` : ''}`, o.help] as [string, string])),
    '',
    'Exit status:',
    ...columns(allExits(commands).map(([k, v]) => [String(k), v])),
  ];
  return out.join('\n') + '\n';
}

/** docs/cli.md: the command reference, generated from the same table as the help pages. */
export function cliMarkdown(commands: readonly CommandSpec[] = COMMANDS): string {
  const out = [
    '# The `penstock` command',
    '',
    '<!-- Generated from src/cli/commands.ts by `npm run docs:cli`; edit the table, not this file. -->',
    '',
    'Every command prints its help page with `penstock help <command>` or `penstock <command> --help`;',
    'this page collects them. Results go to stdout, messages and progress bars to stderr (bars only on',
    'a terminal). A command whose reader goes away (`penstock inspect … | head`) ends quietly with status 0.',
    '',
    '| Command | What it does |',
    '| --- | --- |',
    ...commands.map((c) => `| [\`${c.name}\`](#penstock-${c.name}) | ${c.summary} |`),
    '',
    '## Options shared by the commands',
    '',
    '| Option | Meaning |',
    '| --- | --- |',
    ...Object.values(SHARED_OPTIONS).map((o) => `| \`--${o.name}${'value' in o ? ` ${o.value}` : ''}\` | ${o.help} |`),
    '',
    '## Exit status',
    '',
    '| Status | Meaning |',
    '| --- | --- |',
    ...allExits(commands).map(([k, v]) => `| ${k} | ${v} |`),
    '',
  ];
  for (const c of commands) out.push(`## penstock ${c.name}`, '', `${c.summary[0]!.toUpperCase()}${c.summary.slice(1)}.`, '', '```text', helpPage(c).trimEnd(), '```', '');
  return out.join('\n');
}

/** The README's command section: the commands, the shared options and the exit statuses. */
export function cliReadmeSection(commands: readonly CommandSpec[] = COMMANDS): string {
  return [
    '| Command | What it does |',
    '| --- | --- |',
    ...commands.map((c) => `| [\`penstock ${c.name}\`](docs/cli.md#penstock-${c.name}) | ${c.summary} |`),
    '',
    '| Exit status | Meaning |',
    '| --- | --- |',
    ...allExits(commands).map(([k, v]) => `| ${k} | ${v} |`),
    '',
    `Shared options mean the same in every command: ${Object.values(SHARED_OPTIONS).map((o) => `\`--${o.name}\``).join(', ')}.`,
    'Every option of every command: [docs/cli.md](docs/cli.md), or `penstock help <command>`.',
  ].join('\n');
}
