#!/usr/bin/env node
/**
 * The `penstock` command. The commands themselves, their options and help pages are described in
 * the table in ./commands.ts; this entry point looks the command up, parses its command line from
 * that description and runs it.
 */
import { suggest } from '../settings/config.js';
import { terminalText } from '../vocabulary/terminal-text.js';
import { COMMANDS, findCommand } from './commands.js';
import { EXIT, describeError, runCommand } from './common.js';
import { mainHelp } from './help.js';
import { helpPage, parseLine } from './kit/command.js';
import { installEarlyEnds } from './kit/process-end.js';
import { packageVersion } from './version.js';

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '-h' || name === '--help') {
    process.stdout.write(mainHelp());
    return EXIT.ok;
  }
  if (name === '-V' || name === '-v' || name === '--version') {
    process.stdout.write(`${packageVersion()}\n`);
    return EXIT.ok;
  }
  if (name === 'help') {
    if (rest.length > 1) return usage(`help takes one command at most, got ${rest.length}`);
    const topic = rest[0];
    if (topic === undefined) {
      process.stdout.write(mainHelp());
      return EXIT.ok;
    }
    const spec = findCommand(topic);
    if (!spec) return unknownCommand(topic);
    process.stdout.write(helpPage(spec));
    return EXIT.ok;
  }
  const spec = findCommand(name);
  if (!spec) return unknownCommand(name);
  return runCommand(spec.name, async () => {
    const line = parseLine(spec, rest);
    if (line.values.help) {
      process.stdout.write(helpPage(spec));
      return EXIT.ok;
    }
    await spec.early?.(line);
    return (await spec.load())(line);
  });
}

function usage(message: string): number {
  process.stderr.write(`penstock: ${message}\nRun "penstock --help" for the commands.\n`);
  return EXIT.usage;
}

function unknownCommand(name: string): number {
  const near = suggest(name, [...COMMANDS.map((c) => c.name), 'help']);
  return usage(`unknown command '${terminalText(name)}'${near ? ` (did you mean '${near}'?)` : ''}`);
}

installEarlyEnds();
main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`penstock: ${describeError(err)}\n`);
    process.exitCode = EXIT.failure;
  },
);
