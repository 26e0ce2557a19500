#!/usr/bin/env node
/**
 * The `penstock` command: `demo`, `doctor`, `bench`, `info`, `inspect`, `load`.
 */
import { runDemo } from './demo.js';

const HELP = `penstock — move file data straight between storage and GPU memory

Usage:
  penstock demo [--size 256MiB] [--file PATH] [--host]   read a sample file into GPU memory, verify it, show the route
  penstock doctor [PATH...] [--json] [--probe] [--require-gds] [--offset N] [--size N]
                                                         say which path each file will take, and why
  penstock doctor --gdscheck FILE|-                      judge a 'gdscheck -p' report from another machine
  penstock bench [FILE] [--size 1GiB] [--target device|host] [--op read|write] [--threads 1,4,16]
                 [--task-size 4MiB] [--cold] [--repeat 5] [--json OUT]
                                                         measure throughput, with the route of every number
  penstock bench s3://BUCKET/KEY|http(s)://URL [--target device|host] [--concurrency 1,16] [--range-size 8MiB]
                                                         measure remote reads (parallel ranged GETs)
  penstock info [--json]                                 CUDA driver, cuFile and settings as found
  penstock inspect PATH... [--json]                      list a checkpoint's tensors (safetensors, index.json, .npy)
  penstock load PATH... [--device N | --host [--pinned]] [--prefix P] [--names A,B] [--rows K/N] [--verify] [--json]
                                                         load a checkpoint into GPU (or host) memory, show routes and speed
`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'demo':
      return runDemo(rest);
    case 'doctor': {
      const { runDoctorCli } = await import('./doctor.js');
      return runDoctorCli(rest);
    }
    case 'bench': {
      const { runBenchCli } = await import('./bench.js');
      return runBenchCli(rest);
    }
    case 'info': {
      const { runInfo } = await import('./info.js');
      return runInfo(rest);
    }
    case 'inspect': {
      const { runInspectCli } = await import('./inspect.js');
      return runInspectCli(rest);
    }
    case 'load': {
      const { runLoadCli } = await import('./load.js');
      return runLoadCli(rest);
    }
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(HELP);
      return 0;
    default:
      process.stderr.write(`penstock: unknown command '${cmd}'\n\n${HELP}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const e = err as { code?: string; message?: string };
    process.stderr.write(`penstock: ${e.code ? `[${e.code}] ` : ''}${e.message ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
