#!/usr/bin/env node
/**
 * The `penstock` command: `demo`, `doctor`, `bench`, `info`, `inspect`, `load`, `serve`, `serve-status`, `python-path`.
 */
import { readFileSync } from 'node:fs';
import { suggest } from '../settings/config.js';
import { EXIT, EXIT_HELP } from './common.js';

const HELP = `penstock: move file data straight between storage and GPU memory

Usage: penstock <command> [options]

Commands:
  demo     read a sample file into GPU memory, verify it, show the route
  doctor   say which route each file's reads will take here, and why
  bench    measure throughput, with the route of every number
  info     the CUDA driver, cuFile, the GPUs and the settings as found
  inspect  list a checkpoint's tensors (safetensors, index.json, .npy)
  load     load a checkpoint into GPU (or host) memory; routes and speed
  serve    keep checkpoints resident on the GPU for other processes
  serve-status  what a running "penstock serve" holds
  python-path   the folder of the Python client of "penstock serve"

Run "penstock <command> --help" for a command's options.

Options:
  -h, --help      this text
  -v, --version   the version of penstock

Colours follow NO_COLOR and FORCE_COLOR; progress bars are drawn only on a
terminal. ${EXIT_HELP}`;

const COMMANDS: Record<string, () => Promise<(argv: string[]) => Promise<number>>> = {
  demo: async () => (await import('./demo.js')).runDemo,
  doctor: async () => (await import('./doctor.js')).runDoctorCli,
  bench: async () => (await import('./bench/command.js')).runBenchCli,
  info: async () => (await import('./info.js')).runInfo,
  inspect: async () => (await import('./inspect.js')).runInspectCli,
  load: async () => (await import('./load.js')).runLoadCli,
  serve: async () => (await import('./commands/serve.js')).runServeCli,
  'serve-status': async () => (await import('./commands/serve-status.js')).runServeStatusCli,
  'python-path': async () => (await import('./commands/python-path.js')).runPythonPathCli,
};

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === '-h' || cmd === '--help') {
    process.stdout.write(HELP);
    return EXIT.ok;
  }
  if (cmd === '-v' || cmd === '--version') {
    process.stdout.write(`${version()}\n`);
    return EXIT.ok;
  }
  if (cmd === 'help') {
    const topic = rest[0];
    if (topic === undefined) process.stdout.write(HELP);
    else if (Object.hasOwn(COMMANDS, topic)) return (await COMMANDS[topic]!())(['--help']);
    else return unknownCommand(topic);
    return EXIT.ok;
  }
  if (!Object.hasOwn(COMMANDS, cmd)) return unknownCommand(cmd);
  return (await COMMANDS[cmd]!())(rest);
}

function unknownCommand(cmd: string): number {
  const near = suggest(cmd, Object.keys(COMMANDS));
  process.stderr.write(`penstock: unknown command '${cmd}'${near ? ` (did you mean '${near}'?)` : ''}\nRun "penstock --help" for the commands.\n`);
  return EXIT.usage;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const e = err as { code?: string; message?: string };
    process.stderr.write(`penstock: ${e.code ? `[${e.code}] ` : ''}${e.message ?? String(err)}\n`);
    process.exitCode = EXIT.failure;
  },
);
