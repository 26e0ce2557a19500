/**
 * The table of `penstock` commands: one entry per command, holding everything help shows
 * (usage, description, options, exit statuses) and how to load the code that runs it. The
 * command line is parsed from these entries, `penstock help` and every `--help` page are drawn
 * from them, and docs/cli.md is generated from them (`npm run docs:cli`). Options that mean the
 * same thing in several commands are written once below and shared.
 */
import type { CommandSpec, OptionSpec } from './kit/command.js';
import { DEMO_DEFAULT_SIZE } from './demo-checkpoint.js';

export { DEMO_DEFAULT_SIZE };

/** Options shared by several commands: one spelling and one meaning everywhere. */
export const SHARED_OPTIONS = {
  device: { name: 'device', value: 'N', help: 'use GPU N (default 0)' },
  host: { name: 'host', help: 'use host memory instead of a GPU (also where no GPU is usable)' },
  json: { name: 'json', help: 'print the result as JSON on stdout (and nothing else there)' },
  anonymous: { name: 'anonymous', help: 's3:// without credentials or signing (public buckets)' },
  noProgress: { name: 'no-progress', help: 'draw no progress bar (bars are drawn on stderr, and only when it is a terminal)' },
} as const satisfies Record<string, OptionSpec>;

const S = SHARED_OPTIONS;

/** What `load --verify` and `doctor --require-gds` exit with when the check fails. */
export const EXIT_CHECK_FAILED = 3;

const demo: CommandSpec = {
  name: 'demo',
  summary: 'load a small checkpoint it writes into the GPU, verify it, show the route',
  usage: ['[--size SIZE] [--device N | --host] [options]'],
  description: `Shows what penstock is for on a checkpoint it makes up: a model-shaped safetensors file (embeddings, attention and MLP weights, norms; random values) written into a private temporary directory, loaded tensor by tensor into GPU memory (host memory where no GPU is usable), and checked against the file with sha256 per tensor.

It prints the route the bytes took, why it was not the direct path (GPUDirect Storage) where it was not, and the time from process start to verified tensors: what a program loading this checkpoint pays, start-up included. The directory is removed afterwards, also when the demo is stopped with Ctrl-C or SIGTERM.`,
  options: [
    { name: 'size', value: 'SIZE', help: `about how large the checkpoint is (default ${DEMO_DEFAULT_SIZE}; KiB, MiB, GiB)` },
    S.device,
    S.host,
    S.noProgress,
  ],
  exits: { [EXIT_CHECK_FAILED]: 'a tensor in memory differs from the file' },
  examples: ['npx penstock demo', 'penstock demo --size 1GiB --device 1'],
  load: async () => (await import('./demo.js')).runDemo,
};

const doctor: CommandSpec = {
  name: 'doctor',
  summary: "say which route each file's reads will take here, and why",
  usage: ['[PATH...] [options]', '--gdscheck FILE|- [--json] [--require-gds]'],
  description: `Says which route reads of each PATH into GPU memory take on this machine (default: the current directory), why, and what to change for the direct path (GPUDirect Storage). With --gdscheck it reads a 'gdscheck -p' report from another machine instead.

Colours are used on a terminal; NO_COLOR or TERM=dumb turn them off, FORCE_COLOR turns them on anywhere.`,
  options: [
    S.json,
    { name: 'probe', help: "read each file into GPU memory in a child process and report the measured route, with cuFile's own log lines" },
    { name: 'offset', value: 'N', help: 'predict (and probe) the read starting at byte N' },
    { name: 'size', value: 'N', help: '... of N bytes (KiB, MiB, GiB; default: to the end)' },
    { name: 'target-offset', value: 'N', help: '... into the GPU buffer at byte N (default 0)' },
    { name: 'require-gds', help: `exit ${EXIT_CHECK_FAILED} unless every path gets the direct path` },
    { name: 'gdscheck', value: 'FILE', help: "read a 'gdscheck -p' report (FILE, or - for stdin) instead of this machine" },
  ],
  maxOperands: Infinity,
  exits: { 1: 'failure: a path does not exist, a PENSTOCK_* variable is unusable, or the doctor failed', [EXIT_CHECK_FAILED]: '--require-gds: a path misses the direct path' },
  load: async () => (await import('./doctor.js')).runDoctorCli,
};

const bench: CommandSpec = {
  name: 'bench',
  summary: 'measure throughput, with the route of every number',
  usage: ['[FILE] [options]', 'URL [options]'],
  description: `Measures reads (or writes) between FILE and GPU or host memory. Without FILE a file of random data is created for the run in a private temporary directory (under --dir, or the system's) and removed afterwards, also when the run is stopped with Ctrl-C or SIGTERM.

With an s3://, http:// or https:// URL it measures reads of that object instead, for each --concurrency; s3:// takes credentials, region and endpoint as the AWS tools do.

Throughput is in GB/s (1 GB = 1e9 bytes): median, min and max over the repeats. CPU is the process's user+system seconds per GB moved. Warm runs start with one untimed transfer.`,
  options: [
    { name: 'size', value: 'SIZE', help: "bytes per transfer (default: FILE's size, the object's size, or 1GiB)" },
    S.device,
    S.host,
    { name: 'op', value: 'OP', help: 'read | write (default read); write creates FILE and never overwrites anything already there' },
    { name: 'threads', value: 'LIST', help: 'I/O threads, each value its own run: 1,4,16' },
    { name: 'task-size', value: 'LIST', help: 'bytes per task, each value its own run: 4MiB or 1MiB,16MiB' },
    { name: 'cold', help: "drop FILE's pages from the page cache before every repeat" },
    { name: 'drop-caches', help: 'with --cold: also drop the whole page cache (needs root)' },
    { name: 'fsync', help: 'writes: include fsync in the timed region' },
    { name: 'repeat', value: 'N', help: 'timed repeats per configuration (default 5, URL 3)' },
    { name: 'concurrency', value: 'LIST', help: 'URL: ranged GETs in flight, each value its own run: 1,16,64' },
    { name: 'range-size', value: 'SIZE', help: 'URL: bytes per ranged GET (default: the remoteRangeSize setting)' },
    S.anonymous,
    S.json,
    { name: 'out', value: 'FILE', help: 'also write the results as JSON to FILE' },
    { name: 'dir', value: 'DIR', help: 'where to create the test file' },
    S.noProgress,
  ],
  maxOperands: 1,
  examples: ['penstock bench --size 4GiB --threads 4,8,16', 'penstock bench model.safetensors --cold --out results.json', 'penstock bench s3://bucket/model.safetensors --concurrency 16,64 --host'],
  load: async () => (await import('./bench/command.js')).runBenchCli,
};

const info: CommandSpec = {
  name: 'info',
  summary: 'the CUDA driver, cuFile, the GPUs and the settings as found',
  usage: ['[--json]'],
  description: `Shows the CUDA driver, cuFile, the GPUs and every setting in force with where it came from (default or PENSTOCK_* variable). A variable whose value cannot be used is reported with its value, and so is a native addon that cannot be loaded; either makes the exit status 1.`,
  options: [S.json],
  load: async () => (await import('./info.js')).runInfo,
};

const inspect: CommandSpec = {
  name: 'inspect',
  summary: "list a checkpoint's tensors (safetensors, index.json, .npy)",
  usage: ['PATH... [--json] [--anonymous]'],
  description: `Lists the tensors of a checkpoint (name, dtype, shape, bytes) and the totals, from the headers alone: no tensor data is read and no GPU is used. PATH is a .safetensors file, a sharded *.index.json, .npy files, or an s3://, http:// or https:// URL of one.

Names are printed as they are, with control characters written as escapes (\\x1b, \\n).`,
  options: [S.json, S.anonymous],
  maxOperands: Infinity,
  examples: ['penstock inspect model.safetensors', 'penstock inspect s3://bucket/ckpt/model.safetensors.index.json --json'],
  load: async () => (await import('./inspect.js')).runInspectCli,
};

const load: CommandSpec = {
  name: 'load',
  summary: 'load a checkpoint into GPU (or host) memory; routes and speed',
  usage: ['PATH... [--device N | --host [--pinned]] [options]'],
  description: `Loads a checkpoint (a .safetensors file, a sharded *.index.json, .npy files, or an s3://, http:// or https:// URL of one) into GPU memory, or host memory with --host, and prints what it took: bytes, seconds, GB/s, the routes the bytes took and why a file did not get the direct path.

With --verify every tensor is hashed (sha256) from the memory it landed in and from the file; a mismatch exits with status ${EXIT_CHECK_FAILED}. Progress is drawn on stderr when it is a terminal.`,
  options: [
    S.device,
    S.host,
    { name: 'pinned', help: 'with --host: page-locked host memory' },
    { name: 'prefix', value: 'P', help: 'only the tensors whose names start with P' },
    { name: 'names', value: 'A,B', help: 'only these tensors (each must exist)' },
    { name: 'rows', value: 'K/N', help: "tensor-parallel shard K of N (from 0): only that shard's rows of every 2-D tensor" },
    { name: 'verify', help: `compare every tensor with the file (sha256); exit ${EXIT_CHECK_FAILED} on a mismatch` },
    S.anonymous,
    S.json,
    S.noProgress,
  ],
  maxOperands: Infinity,
  exits: { [EXIT_CHECK_FAILED]: '--verify: a tensor in memory differs from its file' },
  examples: ['penstock load model.safetensors --verify', 'penstock load ckpt/model.safetensors.index.json --device 1 --prefix lm_head.', 'penstock load s3://bucket/model.safetensors --host --anonymous'],
  load: async () => (await import('./load.js')).runLoadCli,
  early: async (line) => {
    if (line.values.host === true) return;
    const device = Number(line.values.device ?? 0);
    // A bad --device is the command's to report; the warm-up only starts what it can.
    if (!Number.isInteger(device) || device < 0) return;
    try {
      const { warmUpGpu } = await import('../addon/gpu-preparation.js');
      void warmUpGpu(device);
    } catch {
      // No addon here: the command reports that itself.
    }
  },
};

const serve: CommandSpec = {
  name: 'serve',
  summary: 'keep checkpoints resident on the GPU and hand them to other processes',
  usage: ['[--socket PATH] [--budget SIZE|N%] [--preload SPEC]...'],
  description: `Runs a daemon that keeps tensor sets resident in GPU memory and hands them to other processes (Node through connectServer, PyTorch through the Python client of 'penstock python-path') over a Unix socket, through CUDA IPC: a set is loaded on its first request and mapped by later ones without a copy. Sets nobody holds are evicted least recently used first when a load needs room under the budget.

It runs until SIGINT or SIGTERM (exit status 130 or 143); its socket is then removed, and its GPU memory goes with the process. The socket's folder is made with mode 0700 when missing and must be this user's alone; peers of other users are refused unless allowed.`,
  options: [
    { name: 'socket', value: 'PATH', help: 'where to listen (default $XDG_RUNTIME_DIR/penstock/serve.sock, else /tmp/penstock-<uid>/serve.sock)' },
    { name: 'budget', value: 'SIZE|N%', help: 'GPU memory the sets may fill on each GPU (default 90%)' },
    { name: 'preload', value: 'SPEC', repeatable: true, help: 'load a set before serving: a path or URL, several joined by commas, or a JSON set spec such as {"path":"/m/model.safetensors","device":1}' },
    { name: 'allow-uid', value: 'UID', repeatable: true, help: 'also serve processes of this user id' },
    { name: 'log-json', help: 'log one JSON object per line on stdout' },
  ],
  examples: ['penstock serve --budget 80% --preload /models/llama/index.json', 'PYTHONPATH=$(penstock python-path) python3 -c "import penstock_client"'],
  load: async () => (await import('./commands/serve.js')).runServeCli,
};

const serveStatus: CommandSpec = {
  name: 'serve-status',
  summary: 'what a running "penstock serve" holds: sets, bytes, leases, hits',
  usage: ['[--socket PATH] [--evict ID | --evict-idle]'],
  description: `Lists the tensor sets a running 'penstock serve' holds in GPU memory: each set's id, GPU, bytes, leases, hits, load time and state, and the daemon's totals and per-GPU memory.`,
  options: [
    { name: 'socket', value: 'PATH', help: "the daemon's socket (default as for penstock serve)" },
    { name: 'evict', value: 'ID', help: 'evict the set with this id or key (refused while it is leased)' },
    { name: 'evict-idle', help: 'evict every set nobody holds' },
    S.json,
  ],
  load: async () => (await import('./commands/serve-status.js')).runServeStatusCli,
};

const pythonPath: CommandSpec = {
  name: 'python-path',
  summary: 'the folder of the Python client of "penstock serve"',
  usage: [''],
  description: `Prints the folder holding penstock_client.py, the Python client of 'penstock serve', for PYTHONPATH.`,
  options: [],
  examples: ['PYTHONPATH=$(penstock python-path) python3 -c "import penstock_client"'],
  load: async () => (await import('./commands/python-path.js')).runPythonPathCli,
};

const version: CommandSpec = {
  name: 'version',
  summary: 'the version of penstock (also -V, --version)',
  usage: [''],
  description: 'Prints the version of penstock and exits.',
  options: [],
  load: async () => (await import('./version.js')).runVersion,
};

/** Every command, in the order `penstock help` lists them. A new command is one more entry. */
export const COMMANDS: readonly CommandSpec[] = [demo, doctor, bench, info, inspect, load, serve, serveStatus, pythonPath, version];

/** The command called `name`, if there is one. */
export function findCommand(name: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.name === name);
}
