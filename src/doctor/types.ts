/**
 * The doctor's report: the shape `diagnose()` returns and `penstock doctor --json` prints.
 * Check ids and field names are stable; new checks and fields may be added.
 */
import type { CompatMode } from '../settings/config.js';
import type { CudaStatus, CuFileStatus, NativeDeviceInfo } from '../vocabulary/native-contract.js';
import type { Route, RouteCounters } from '../engine/stats.js';
import type { CuFileConfig } from '../system/cufile-json.js';

/** `pass` ✓, `fail` ✗ (stands in the way), `warn` ! (works, but worse or unverified), `info` · (a fact). */
export type CheckStatus = 'pass' | 'fail' | 'warn' | 'info';

/** One check of the platform or a path: its verdict, what was found and what to do. */
export interface Check {
  /** Stable id, e.g. `platform.nvidia_fs` or `path.udev` (docs/doctor.md lists them). */
  id: string;
  /** The verdict: pass, fail, warn or info. */
  status: CheckStatus;
  /** A short label for people. */
  title: string;
  /** What was found, in one line. */
  summary: string;
  /** What to do about it, when something should change. */
  fix?: string;
  /** The facts behind the summary, for scripts. */
  data?: Record<string, unknown>;
}

/** A reason, with a stable code for scripts and a sentence that says what to do. */
export interface Finding {
  /** Stable code for scripts, e.g. `NO_UDEV` (docs/doctor.md lists them). */
  code: string;
  /** One sentence for people: what stands in the way and what to do. */
  message: string;
  /** The check that shows the underlying fact. */
  check?: string;
}

/**
 * The route device reads of a file would take: `gds` (direct DMA), `cufile-compat` (cuFile
 * accepts the file and stages it itself), `posix-device` (penstock's staged path), or
 * `posix-host` (no usable GPU: only host reads are possible).
 */
export type PredictedRoute = Extract<Route, 'gds' | 'cufile-compat' | 'posix-device' | 'posix-host'>;

/** The route the doctor predicts for device reads of one file, and why. */
export interface Prediction {
  /** The predicted route. */
  route: PredictedRoute;
  /** Everything that keeps this file off the direct path, each with what to do. */
  blockers: Finding[];
  /** Things that do not block the direct path but slow it or leave it unverified. */
  warnings: Finding[];
}

/** Starts the probe process's result line on its stdout (anything else there is ignored). */
export const PROBE_MARK = 'penstock-probe-result ';

/** What `--probe` measured for one path. */
export interface ProbeResult {
  /**
   * `measured`: a read ran and its route is known; `skipped`: nothing to measure (no GPU, a
   * recorded root); `failed`: the probe reported an error; `crashed`: it died of a signal or
   * exited without a result; `timeout`: it was killed for taking too long.
   */
  status: 'measured' | 'skipped' | 'failed' | 'crashed' | 'timeout';
  /** One line for people: what was read, or why nothing was. */
  message: string;
  /** The route that carried most of the bytes. */
  route?: Route;
  /** Per-route counters of the measured read (routes that moved nothing left out). */
  routes?: Partial<Record<Route, RouteCounters>>;
  /** The file's recorded route reason, when penstock fell back. */
  reason?: { code: string; message: string; cufileCode?: string; cufileNumber?: number };
  /** Bytes the measured read moved; present when `measured`. */
  bytes?: number;
  /** Wall time of the measured read (s); present when `measured`. */
  seconds?: number;
  /** Whether the measurement matches the prediction (absent when nothing was measured). */
  agrees?: boolean;
  /** The signal the probe process died of (`SIGKILL` on timeout); present when it was killed. */
  signal?: string;
  /** The probe process's non-zero exit code; present when it exited with one. */
  exitCode?: number;
  /** The lines of cuFile's log (written at TRACE into a private file) that explain the outcome. */
  cufileLog?: string[];
  /** Each quoted line with the doctor's code for its cause and whether the prediction named it. */
  cufileEvidence?: { line: string; code?: string; predicted?: boolean }[];
  /** The parsed lines, between the probe and its judgement (not part of the report). */
  cufileLines?: import('./cufile-log.js').CuFileLogLine[];
}

/** The route of one read of a file, by its offset and size (`--offset`, `--size`). */
export interface ShapePrediction {
  /** Byte offset in the file where the read starts. */
  offset: number;
  /** Bytes that would be read (clipped at the end of the file). */
  size: number;
  /** Where in the target GPU buffer the data lands, when not at its start. */
  targetOffset?: number;
  /**
   * `gds` (direct), `gds-bounce` (cuFile, its unaligned parts through its GPU bounce cache),
   * `cufile-compat`, `posix-device` or `posix-host`.
   */
  route: PredictedRoute | 'gds-bounce';
  /** The file's own predicted route. */
  fileRoute: PredictedRoute;
  /** Why this read takes a different route from the direct one. */
  reasons: Finding[];
  /** Facts about this read worth knowing that do not change its route. */
  notes: Finding[];
}

/** The doctor's findings for one path: checks, predicted route and, when probed, the measured one. */
export interface PathReport {
  /** The path as given. */
  path: string;
  /** The absolute path that was examined. */
  resolved: string;
  /** The per-path checks (file system, mount, device, cufile.json), in order. */
  checks: Check[];
  /** The predicted route of device reads of the whole file. */
  prediction: Prediction;
  /** The route of the read given by `shape` (offset and size), when one was given. */
  shape?: ShapePrediction;
  /** What `--probe` measured; present only when probing was asked for. */
  probe?: ProbeResult;
  /** One line: the route and the first thing to do about it. */
  verdict: string;
}

/** What {@link diagnose} returns and `penstock doctor --json` prints. */
export interface DoctorReport {
  /** Version of this report's layout. */
  schema: 1;
  /** The directory read as `/` (`/` on a live system). */
  root: string;
  /** When the report was made, as an ISO 8601 timestamp. */
  generatedAt: string;
  /** The platform checks (driver, cuFile, nvidia-fs, GPUs, ...), in order. */
  platform: Check[];
  /** One report per path given, in the order given. */
  paths: PathReport[];
  /** Whether every path gets (or, when probed, got) the direct path. */
  allDirect: boolean;
}

/**
 * The CUDA and cuFile facts the doctor works from. The live ones come from penstock's runtime;
 * tests and tools can state them instead (say, "driver present, cuFile 1.15, nvidia-fs 2.17").
 */
export interface PlatformFacts {
  /** The CUDA driver's load and init status. */
  cuda: CudaStatus;
  /** The GPUs the CUDA driver sees (empty without a usable driver). */
  gpus: NativeDeviceInfo[];
  /** The cuFile library's load and driver status. */
  cufile: CuFileStatus;
  /** Set when penstock's native addon could not be loaded at all. */
  addonError?: string;
}

/** Options of {@link diagnose}. */
export interface DiagnoseOptions {
  /** Run a real read of each path in a child process and report the measured route. */
  probe?: boolean;
  /** The directory read as `/` (default `/`). */
  root?: string;
  /** The environment whose CUFILE_* and PENSTOCK_* variables are in effect (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** CUDA and cuFile facts to use instead of asking the runtime. */
  facts?: PlatformFacts;
  /** Bytes the probe reads from each file (default 4 MiB). */
  probeBytes?: number;
  /** Milliseconds before a probe is killed (default 60 000). */
  probeTimeoutMs?: number;
  /** The script the probe process runs (default: penstock's own probe). */
  probeScript?: string;
  /** A read to predict (and probe) for each file: its offset and size (default: the whole file). */
  shape?: { offset: number; size?: number; targetOffset?: number };
}

/** What the platform checks established, for the per-path predictions. */
export interface PlatformState {
  cudaUsable: boolean;
  cudaProblem?: string;
  /** What to do about it. */
  cudaFix?: string;
  driverVersion?: number;
  gpus: GpuState[];
  cufileUsable: boolean;
  cufileProblem?: Finding;
  /** nvidia-fs loaded (procfs or the driver's properties say so). */
  nvfsLoaded: boolean;
  /** /dev/nvidia-fs* nodes visible. */
  nvfsDevices: number;
  /** Back ends the cuFile driver reports, when it was opened. */
  backends?: string[];
  compatAllowed: boolean;
  /** Where compat mode is forced, when it is. */
  forceCompat?: string;
  p2pdma: 'available' | 'absent' | 'unknown';
  usePciP2pdma: boolean;
  /** Everything the PCI P2PDMA path needs is in place (it stands in for nvidia-fs). */
  p2pPath: boolean;
  /** Set when this is WSL (no direct path). */
  wsl?: string;
  /** nvidia_peermem loaded (RDMA file systems need it). */
  nvidiaPeermem: boolean;
  /** The cufile.json settings the per-path predictions use. */
  cufileConfig: CuFileConfig;
  /** penstock's settings in force for the environment (gdsThreshold, compat mode). */
  gdsThreshold: number;
  penstockCompatMode: CompatMode;
  /** /run/udev/data exists. */
  udevDatabase: boolean;
  container: string[];
  vm: string[];
  iommu: 'off' | 'on' | 'passthrough' | 'unknown';
}

export interface GpuState {
  ordinal: number;
  name: string;
  pciBusId: string;
  /** The GPU's device directory under /sys/devices, when found. */
  sysPath?: string;
  bar1Bytes?: number;
  numaNode?: number;
}
