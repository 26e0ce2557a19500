// Builds the test-only fake CUDA driver and cuFile libraries into <repo>/dist/fake-driver/.
// Run from anywhere (npm runs it from the repo root): paths are resolved from this file.
// Tests load the results through PENSTOCK_CUDA_LIBRARY and PENSTOCK_CUFILE_LIBRARY.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const outDir = path.join(repo, 'dist', 'fake-driver');
const cc = process.env.CC || 'cc';
// Extra flags, e.g. sanitizers for test:asan (space-separated).
const extra = (process.env.FAKE_DRIVER_CFLAGS ?? '').split(' ').filter(Boolean);

const common = [
  '-std=c11', '-O1', '-g', '-fPIC', '-shared', '-pthread', '-Wall', '-Wextra',
  '-Werror=implicit-function-declaration',
  // Only the API (FAKE_API) is exported, so internal helpers cannot be interposed or collide.
  '-fvisibility=hidden',
  // Stream worker threads run library code: the library must never be unmapped under them.
  '-Wl,-z,nodelete',
  '-Wl,--no-undefined',
];

const cuda = path.join(outDir, 'libcuda.so.1');
const cufile = path.join(outDir, 'libcufile.so.0');
// The same driver without the CUDA IPC entry points, as a driver that lacks them would be.
const cudaNoIpc = path.join(outDir, 'no-ipc', 'libcuda.so.1');
// Without batch copies (a driver before CUDA 12.8), and with only their 12.8-12.9 form.
const cudaNoCopyBatch = path.join(outDir, 'no-copy-batch', 'libcuda.so.1');
const cudaCopyBatchV1 = path.join(outDir, 'copy-batch-v1', 'libcuda.so.1');
const cudaCore = ['fake_cuda.c', 'fake_memory.c', 'fake_stream.c', 'fake_event.c', 'fake_switches.c'];
const cudaSources = [...cudaCore, 'fake_copy_batch.c'];
const cudaHeaders = ['fake_internal.h', 'fake_stream.h', 'fake_switches.h'];

const targets = [
  {
    output: cuda,
    sources: [...cudaSources, 'fake_ipc.c'],
    headers: cudaHeaders,
    flags: ['-Wl,-soname,libcuda.so.1'],
    inputs: [],
  },
  {
    output: cudaNoIpc,
    sources: cudaSources,
    headers: cudaHeaders,
    flags: ['-Wl,-soname,libcuda.so.1'],
    inputs: [],
  },
  {
    output: cudaNoCopyBatch,
    sources: [...cudaCore, 'fake_ipc.c'],
    headers: cudaHeaders,
    flags: ['-Wl,-soname,libcuda.so.1'],
    inputs: [],
  },
  {
    output: cudaCopyBatchV1,
    sources: [...cudaSources, 'fake_ipc.c'],
    headers: cudaHeaders,
    flags: ['-Wl,-soname,libcuda.so.1', '-DFAKE_COPY_BATCH_V1_ONLY'],
    inputs: [],
  },
  {
    output: cufile,
    sources: ['fake_cufile.c', 'fake_cufile_stats.c', 'fake_switches.c'],
    headers: ['fake_cufile.h', 'fake_switches.h'],
    // DT_NEEDED libcuda.so.1 found next to this file, so that a process which dlopens both from
    // one folder shares a single fake libcuda and its allocation table. DT_RPATH rather than
    // DT_RUNPATH: it wins over LD_LIBRARY_PATH, which might name a real driver.
    flags: ['-Wl,-soname,libcufile.so.0', cuda, '-Wl,-rpath,$ORIGIN', '-Wl,--disable-new-dtags'],
    inputs: [cuda],
  },
  {
    output: path.join(outDir, 'libdirect_einval.so'),
    sources: ['direct_einval.c'],
    headers: [],
    flags: ['-ldl'],
    inputs: [],
  },
];

function mtime(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return -Infinity;
  }
}

for (const variant of [cudaNoIpc, cudaNoCopyBatch, cudaCopyBatchV1]) fs.mkdirSync(path.dirname(variant), { recursive: true });
let built = 0;
for (const t of targets) {
  const sources = t.sources.map((s) => path.join(here, s));
  const inputs = [...sources, ...t.headers.map((h) => path.join(here, h)), ...t.inputs, fileURLToPath(import.meta.url)];
  const newest = Math.max(...inputs.map(mtime));
  if (mtime(t.output) > newest) continue;
  // Compile to a temporary name: a failed build must not leave an output that looks up to date,
  // and renaming never rewrites a library some running process has mapped.
  const tmp = `${t.output}.tmp-${process.pid}`;
  const res = spawnSync(cc, [...common, ...extra, ...sources, ...t.flags, '-o', tmp], { stdio: 'inherit' });
  if (res.error || res.status !== 0) {
    fs.rmSync(tmp, { force: true });
    const why = res.error ? res.error.message : `exit status ${res.status ?? res.signal}`;
    console.error(`fake driver: compiling ${path.basename(t.output)} with ${cc} failed (${why})`);
    process.exit(1);
  }
  fs.renameSync(tmp, t.output);
  built++;
}
console.log(`fake driver: ${cuda} and ${cufile} ${built ? 'built' : 'up to date'}`);
