/**
 * `gdscheck -p` reports, read into the doctor's checks, so that a machine penstock is not
 * installed on can be judged from a pasted report. The layout has grown over the releases (GDS
 * 1.0 to 1.16 and later): sections headed by `====` lines (ENVIRONMENT, DRIVER CONFIGURATION,
 * CUFILE CONFIGURATION, GPU INFO, PLATFORM INFO), `name : value` lines, back-end states written
 * `Supported`, `Unsupported` or `compat`, and one line per GPU. Unknown lines are kept, not fatal.
 */
import type { Check } from './types.js';

/** One `GPU index …` line. */
export interface GdscheckGpu {
  index: number;
  name: string;
  barMiB?: number;
  supportsGds: boolean;
  iommu?: string;
}

/** What a report says, as written (values are strings, back-end states normalised). */
export interface GdscheckParsed {
  gdsVersion?: string;
  nvfsVersion?: string;
  nvfsMinimum?: string;
  libcufileVersion?: string;
  environment: Record<string, string>;
  /** Back end → `supported`, `unsupported`, `compat`, or the text as written. */
  drivers: Record<string, string>;
  rdma: Record<string, string>;
  config: Record<string, string>;
  gpus: GdscheckGpu[];
  platform: Record<string, string>;
  /** `succeeded`, `failed`, or undefined when the report does not say. */
  verification?: 'succeeded' | 'failed';
  /** Lines that fit no known form. */
  unknown: string[];
}

/** `readGdscheck()`'s result, and what `penstock doctor --gdscheck --json` prints. */
export interface GdscheckReport {
  /** Version of this report's layout. */
  schema: 1;
  /** Where the text came from, as given (a file path, or `stdin`). */
  source: string;
  /** The facts read from the report, section by section. */
  parsed: GdscheckParsed;
  /** The doctor's checks of those facts. */
  checks: Check[];
}

const SECTION = /^(ENVIRONMENT|DRIVER CONFIGURATION|CUFILE CONFIGURATION|GPU INFO|PLATFORM INFO)\s*:?\s*$/i;
const GPU_LINE = /^GPU index (\d+) (.+?) bar:\s*(\d+)\s+bar size \(MiB\)\s*:\s*(\d+)\s*,?\s*(supports GDS|does not support GDS|GDS not supported)?\s*,?\s*(?:IOMMU State\s*:\s*(\w+))?/i;

function state(v: string): string {
  const t = v.trim();
  if (/^supported$/i.test(t)) return 'supported';
  if (/^unsupported$/i.test(t)) return 'unsupported';
  if (/^compat/i.test(t)) return 'compat';
  return t;
}

/** The facts of a `gdscheck -p` report, section by section. */
export function parseGdscheck(text: string): GdscheckParsed {
  const out: GdscheckParsed = { environment: {}, drivers: {}, rdma: {}, config: {}, gpus: [], platform: {}, unknown: [] };
  let section = '';
  for (const raw of text.replace(/\r/g, '').split('\n')) {
    const line = raw.replace(/\*\*/g, '').trim();
    if (!line || /^=+$/.test(line)) continue;
    const head = SECTION.exec(line);
    if (head) {
      section = head[1]!.toUpperCase();
      continue;
    }
    let m: RegExpExecArray | null;
    if ((m = /^GDS release version:\s*(\S+)/i.exec(line))) out.gdsVersion = m[1];
    else if (/nvidia_fs (minimum )?version|libcufile version/i.test(line)) {
      const v = /nvidia_fs version:\s*(\d+\.\d+)/i.exec(line);
      const min = /nvidia_fs minimum version:\s*(\d+\.\d+)/i.exec(line);
      const lib = /libcufile version:\s*(\d+\.\d+)/i.exec(line);
      if (v) out.nvfsVersion = v[1];
      if (min) out.nvfsMinimum = min[1];
      if (lib) out.libcufileVersion = lib[1];
    } else if (/^Platform verification (succeeded|failed)/i.test(line)) out.verification = /succeeded/i.test(line) ? 'succeeded' : 'failed';
    else if ((m = GPU_LINE.exec(line)))
      out.gpus.push({
        index: Number(m[1]), name: m[2]!.trim(), barMiB: Number(m[4]), supportsGds: /^supports/i.test(m[5] ?? ''),
        ...(m[6] ? { iommu: m[6].toLowerCase() } : {}),
      });
    else if ((m = /^(--)?\s*([^:]+?)\s*:\s*(.*)$/.exec(line))) {
      const key = m[2]!.trim();
      const value = m[3]!.trim();
      if (section === 'ENVIRONMENT') out.environment[key] = value;
      else if (section === 'DRIVER CONFIGURATION') (m[1] ? out.rdma : out.drivers)[key] = m[1] ? value : state(value);
      else if (section === 'CUFILE CONFIGURATION') out.config[key] = value;
      else if (section === 'PLATFORM INFO' || section === 'GPU INFO' || section === '') out.platform[key] = value;
      else out.unknown.push(line);
    } else out.unknown.push(line);
  }
  return out;
}

const BOOL = (v: string | undefined) => (v === undefined ? undefined : /^true$/i.test(v) ? true : /^false$/i.test(v) ? false : undefined);

/** The doctor's checks from a parsed report (ids as for a live machine where they mean the same). */
export function gdscheckChecks(g: GdscheckParsed): Check[] {
  const checks: Check[] = [];
  const add = (c: Check) => checks.push(c);
  add({
    id: 'platform.cufile.library', status: g.gdsVersion || g.libcufileVersion ? 'pass' : 'info', title: 'cuFile library',
    summary: `GDS release ${g.gdsVersion ?? 'unknown'}${g.libcufileVersion ? `, libcufile ${g.libcufileVersion}` : ''}`,
    data: { gdsVersion: g.gdsVersion, libcufileVersion: g.libcufileVersion },
  });
  const nvfs = g.nvfsVersion && g.nvfsVersion !== '0.0' ? g.nvfsVersion : undefined;
  const p2pState = g.drivers['NVMe P2PDMA'];
  const p2pOn = BOOL(g.config['properties.use_pci_p2pdma']) === true && p2pState === 'supported';
  add({
    id: 'platform.nvidia_fs', status: nvfs ? 'pass' : p2pOn ? 'info' : 'fail', title: 'nvidia-fs',
    summary: nvfs ? `loaded, version ${nvfs}` : `not loaded (the report gives no nvidia_fs version${g.nvfsMinimum ? `, only the minimum ${g.nvfsMinimum}` : ''})${p2pOn ? '; the P2PDMA path is set up instead' : ''}`,
    ...(!nvfs && !p2pOn ? { fix: 'load the nvidia-fs kernel module (modprobe nvidia-fs), or set up the PCI P2PDMA path' } : {}),
    data: { version: nvfs ?? null, minimum: g.nvfsMinimum },
  });
  const entries = Object.entries(g.drivers);
  const direct = entries.filter(([, v]) => v === 'supported').map(([k]) => k);
  const compat = entries.filter(([, v]) => v === 'compat').map(([k]) => k);
  const nvme = g.drivers.NVMe;
  add({
    id: 'platform.cufile.driver',
    status: direct.length ? 'pass' : 'fail',
    title: 'cuFile back ends',
    summary: entries.length
      ? `direct: ${direct.join(', ') || 'none'}${compat.length ? `; compat only: ${compat.join(', ')}` : ''}`
      : 'no DRIVER CONFIGURATION section in the report',
    ...(!direct.length
      ? { fix: nvme === 'unsupported' && nvfs ? 'nvidia-fs is loaded but NVMe is unsupported: the NVMe driver is not registered with nvidia-fs (use a GDS-enabled NVMe driver stack and the nvidia-fs built for it)' : 'no back end can go direct: load nvidia-fs (or set up P2PDMA) and use a supported NVMe or RDMA file system' }
      : {}),
    data: { drivers: g.drivers, direct, compat },
  });
  const compatKey = g.config['properties.allow_compat_mode'] ?? g.config['properties.use_compat_mode'];
  const forced = BOOL(g.config['properties.force_compat_mode']) === true || /^(1|true)$/i.test(g.environment.CUFILE_FORCE_COMPAT_MODE ?? '');
  add({
    id: 'platform.compat', status: forced ? 'fail' : 'pass', title: 'Compat mode',
    summary: `cuFile compat mode ${BOOL(compatKey) === false ? 'not allowed' : compatKey ? 'allowed as a fallback' : 'not stated'}${forced ? '; forced (every read through host memory)' : ', not forced'}`,
    ...(forced ? { fix: 'set properties.force_compat_mode to false and unset CUFILE_FORCE_COMPAT_MODE' } : {}),
    data: { allowed: BOOL(compatKey), forced },
  });
  add({
    id: 'platform.pci_p2pdma', status: p2pOn ? 'pass' : 'info', title: 'PCI P2PDMA',
    summary: p2pState === undefined ? 'not in this report (GDS before 1.14)' : `NVMe P2PDMA ${p2pState}; use_pci_p2pdma ${g.config['properties.use_pci_p2pdma'] ?? 'not stated'}`,
    data: { state: p2pState, usePciP2pdma: BOOL(g.config['properties.use_pci_p2pdma']) },
  });
  const notes: string[] = [];
  for (const [k, v] of Object.entries(g.config)) {
    if (/posix_gds_min_kb$/.test(k) && Number(v) > 0) notes.push(`${k}=${v} (smaller I/O through POSIX)`);
    if (/^denylist\./.test(k) && v && v !== '[]') notes.push(`${k}: ${v}`);
    if (k === 'fs.generic.posix_unaligned_writes' && BOOL(v)) notes.push('posix_unaligned_writes=true');
  }
  const pinnedKb = Number(g.config['properties.max_device_pinned_mem_size_kb']);
  const tight = g.gpus.filter((x) => x.barMiB !== undefined && pinnedKb > x.barMiB * 1024);
  if (tight.length) notes.push(`max_device_pinned_mem_size_kb ${pinnedKb} exceeds BAR1 of GPU ${tight.map((x) => `${x.index} (${x.barMiB} MiB)`).join(', ')}`);
  add({ id: 'platform.cufile.settings', status: notes.length ? 'warn' : 'info', title: 'cuFile settings', summary: notes.join('; ') || 'nothing that changes the path', data: { config: g.config } });
  const noGds = g.gpus.filter((x) => !x.supportsGds);
  add({
    id: 'platform.gpus', status: !g.gpus.length ? 'info' : noGds.length ? 'fail' : 'pass', title: 'GPUs',
    summary: g.gpus.length ? g.gpus.map((x) => `GPU ${x.index}: ${x.name}, BAR1 ${x.barMiB} MiB, ${x.supportsGds ? 'supports GDS' : 'no GDS'}`).join('; ') : 'no GPU INFO lines',
    ...(noGds.length ? { fix: `GPU ${noGds.map((x) => x.index).join(', ')} cannot take the direct path (GeForce class, or no BAR1): use a data-centre GPU` } : {}),
    data: { gpus: g.gpus },
  });
  const iommu = (g.platform.IOMMU ?? g.gpus.find((x) => x.iommu)?.iommu ?? '').toLowerCase();
  add({
    id: 'platform.iommu', status: /enabled|on/.test(iommu) ? 'warn' : iommu ? 'pass' : 'info', title: 'IOMMU',
    summary: iommu || 'not stated',
    ...(/enabled|on/.test(iommu) ? { fix: 'boot with iommu=pt (or the IOMMU off): with DMA translated the direct path may fail or slow down' } : {}),
    data: { iommu },
  });
  const driverInfo = g.platform['Nvidia Driver Info Status'];
  if (driverInfo) add({ id: 'platform.nvidia.kernel_module', status: /not supported|unsupported/i.test(driverInfo) ? 'fail' : 'pass', title: 'NVIDIA module', summary: driverInfo, data: { status: driverInfo } });
  const cuda = g.platform['Cuda Driver Version Installed'];
  if (cuda) add({ id: 'platform.cuda.driver', status: 'info', title: 'CUDA driver', summary: `version ${cuda}`, data: { driverVersion: Number(cuda) } });
  const peer = g.rdma['Mellanox PeerDirect'];
  if (peer) add({ id: 'platform.nvidia_peermem', status: 'info', title: 'PeerDirect', summary: `Mellanox PeerDirect ${peer}; rdma library ${g.rdma['rdma library'] ?? 'not stated'}`, data: { ...g.rdma } });
  const env = Object.entries(g.environment);
  add({ id: 'platform.env', status: 'info', title: 'Environment', summary: env.length ? env.map(([k, v]) => `${k}=${v}`).join(' ') : 'none shown', data: g.environment });
  add({
    id: 'gdscheck.verification', status: g.verification === 'failed' ? 'fail' : g.verification ? 'pass' : 'info', title: 'Verification',
    summary: g.verification ? `gdscheck's platform verification ${g.verification}` : 'the report does not say',
    data: { verification: g.verification ?? null, unknownLines: g.unknown.length },
  });
  return checks;
}

/** A `gdscheck -p` report (its text, and where it came from for the report) judged as the doctor's checks. */
export function readGdscheck(text: string, source: string): GdscheckReport {
  const parsed = parseGdscheck(text);
  return { schema: 1, source, parsed, checks: gdscheckChecks(parsed) };
}
