/**
 * cuFile's own words: the lines of cufile.log that explain why a file went direct or not, each
 * tied to the doctor's reason code for the same cause, so that the report can set cuFile's
 * evidence beside the prediction. The line format is cuFile's:
 * `DD-MM-YYYY HH:MM:SS:mmm [pid=N tid=N] LEVEL  module:line message`.
 */

/** One line of cufile.log. */
export interface CuFileLogLine {
  level: string;
  /** cuFile's module and source line (`cufio-fs:268`). */
  where: string;
  message: string;
  /** The doctor's reason code for what the line says, when it explains a route. */
  code?: string;
}

/**
 * cuFile saying the PCI P2PDMA path is not available: its configuration does not enable it
 * (`Config doesn't support PCIP2PDMA`), CUDA refuses the GPU attribute (`pci_p2pdma not supported errornum: 801`), the
 * summary of its checks (`Is PCIP2PDMA Supported: 0 kernel Support: 0 …`), or the back-end table
 * of the driver (`NVMe P2PDMA        : Unsupported`). A `1` or `Supported` there says the opposite.
 */
const P2PDMA_UNSUPPORTED = /doesn'?t support PCI_?P2PDMA|P2PDMA\s+not supported|P2PDMA\s+Supported\s*:\s*0\b|P2PDMA\s*:\s*Unsupported/i;

/** What cuFile's messages mean, in the doctor's reason codes (first match wins). */
const EXPLAINERS: [RegExp, string][] = [
  [/udev property not found|error creating udev_device|udev_device_new/i, 'UDEV_NO_DATA'],
  [/Unsupported block device/i, 'DEVICE_MAPPER'],
  [/NVMe Driver not registered with nvidia-fs/i, 'NVME_NOT_SUPPORTED'],
  // cuFile reads /proc/driver/nvidia-fs/devcount, which exists only while nvidia-fs is loaded.
  [/nvidia-fs\.ko driver not loaded|nvidia-fs driver not loaded|unable to open \/dev\/nvidia-fs|failed to open \/proc\/driver\/nvidia-fs\//i, 'NO_NVIDIA_FS'],
  [/mount options? not (found|specified)|data=ordered/i, 'EXT4_NOT_DATA_ORDERED'],
  [/nvidia_peermem\.ko is not loaded/i, 'NO_NVIDIA_PEERMEM'],
  [/Inc-bar-usage failed|BAR1? (memory )?(exhausted|full)/i, 'BAR1_EXHAUSTED'],
  [/cuInit Failed|cuFile initialization failed/i, 'NO_CUDA'],
  [/denylist|blacklist|IO disabled/i, 'CUFILE_DENYLISTED'],
  [/force_compat_mode|forced compat/i, 'COMPAT_FORCED'],
  [/unsupported (file ?system|fs)|fs type .*not supported|filesystem not supported/i, 'FS_NOT_SUPPORTED'],
  // Only lines that say the P2PDMA path is unavailable. cuFile names P2PDMA in many lines that
  // say nothing of the kind: a TRACE note of the GPU memory it allocates to test for P2PDMA, a
  // DEBUG dump of the GPU's attributes (`PCIP2PDMACapable:0` among a dozen others), its settings.
  [P2PDMA_UNSUPPORTED, 'P2PDMA_UNSUPPORTED'],
  [/unaligned/i, 'UNALIGNED_IO'],
  [/GDS not supported or disabled by config|using cuFile posix/i, 'CUFILE_COMPAT_FOR_FILE'],
  [/running in compatible mode|compat(ibility)? mode enabled/i, 'CUFILE_COMPAT_MODE'],
];

const CONFIG_DUMP = /^[\w-]+(\.[\w-]+)+\s*:/;
const LINE = /^\s*\d{1,2}-\d{1,2}-\d{4}\s+[\d:]+\s+\[pid=\d+\s+tid=\d+\]\s+(TRACE|DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|FATAL|CRITICAL)\s+(\S+)\s+(.*)$/;

/** Every line of a cufile.log text in cuFile's format (other lines are left out). */
export function parseCuFileLog(text: string): CuFileLogLine[] {
  const out: CuFileLogLine[] = [];
  for (const raw of text.split('\n')) {
    const m = LINE.exec(raw);
    if (!m) continue;
    const message = m[3]!.trim();
    // At INFO and below cuFile also dumps its configuration (`properties.force_compat_mode : false`):
    // a setting's name is not a cause.
    const setting = CONFIG_DUMP.test(message);
    const code = setting ? undefined : EXPLAINERS.find(([re]) => re.test(message))?.[1];
    out.push({ level: m[1]!, where: m[2]!, message, ...(code ? { code } : {}) });
  }
  return out;
}

/** Codes that are the same cause under another name (what cuFile says vs what the doctor predicts). */
const SAME_CAUSE: Record<string, string[]> = {
  UDEV_NO_DATA: ['UDEV_NO_DATA', 'NO_UDEV', 'MD_NO_UDEV_RULE'],
  DEVICE_MAPPER: ['DEVICE_MAPPER', 'MD_NOT_NVME', 'MD_RAID_LEVEL', 'UNSUPPORTED_DEVICE', 'VIRTIO_DISK', 'LOOP_DEVICE', 'SCSI_DISK', 'NO_BLOCK_DEVICE'],
  NO_NVIDIA_FS: ['NO_NVIDIA_FS', 'NO_NVIDIA_FS_DEVICES'],
  FS_NOT_SUPPORTED: ['FS_NOT_SUPPORTED', 'FS_COMPAT_ONLY', 'FS_REFUSED', 'NFS_WITHOUT_RDMA'],
  BAR1_EXHAUSTED: ['BAR1_EXHAUSTED', 'SHAPE_OVER_BAR1'],
};

/** The lines worth showing: those that explain a route, then errors and warnings; at most `limit`. */
export function explainingLines(lines: CuFileLogLine[], limit = 12): CuFileLogLine[] {
  const seen = new Set<string>();
  const unique = lines.filter((l) => {
    const key = `${l.level} ${l.where} ${l.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  const explaining = unique.filter((l) => l.code);
  const errors = unique.filter((l) => !l.code && /^(ERROR|FATAL|CRITICAL|WARN)/.test(l.level));
  return [...explaining, ...errors].slice(0, limit);
}

/** What the doctor concluded about the kernel paths, which a line about P2PDMA is judged by. */
export interface KernelPathContext {
  /**
   * The doctor counted on the PCI P2PDMA path for the direct path: it found P2PDMA ready and
   * nvidia-fs not usable (the platform state's `p2pPath` without a loaded nvidia-fs and its
   * device nodes).
   */
  reliesOnP2pdma?: boolean;
}

/**
 * Predictions that already say the P2PDMA path is not there. cuFile's direct path needs a kernel
 * path, nvidia-fs or (CUDA 12.8 and later, a kernel with CONFIG_PCI_P2PDMA, `use_pci_p2pdma`) the
 * P2PDMA path. predict.ts reports NO_NVIDIA_FS when neither is there and NO_NVIDIA_FS_DEVICES when
 * nvidia-fs is loaded without its device nodes and P2PDMA is not ready: both sentences name P2PDMA
 * as the alternative, so "P2PDMA is unsupported" is part of what they predicted. NVME_NOT_SUPPORTED
 * is reported only when the driver lists neither NVMe nor NVMe P2PDMA, so it predicts it too.
 * P2PDMA readiness itself has no reason code of its own: it is a platform check whose outcome
 * shows in these codes.
 */
const P2PDMA_PREDICTED_BY = ['NO_NVIDIA_FS', 'NO_NVIDIA_FS_DEVICES', 'NVME_NOT_SUPPORTED'];

/**
 * Whether the prediction named the cause a line gives: `true`, `false` (cuFile names a cause the
 * prediction missed), or undefined when the line states an outcome rather than a cause.
 *
 * A line saying P2PDMA is unavailable is a cause only where P2PDMA was the kernel path in
 * question. Without one of the codes above, either nvidia-fs carries the direct path (P2PDMA is
 * an alternative not in use, so cuFile finding it unavailable explains no fallback) or the doctor found P2PDMA ready and counted on it (`context.reliesOnP2pdma`), in
 * which case cuFile contradicts the doctor and the line is a missed cause.
 */
export function predictedBy(line: CuFileLogLine, predictedCodes: string[], context: KernelPathContext = {}): boolean | undefined {
  if (!line.code || line.code === 'CUFILE_COMPAT_FOR_FILE' || line.code === 'CUFILE_COMPAT_MODE') return undefined;
  if (line.code === 'P2PDMA_UNSUPPORTED') {
    if (P2PDMA_PREDICTED_BY.some((c) => predictedCodes.includes(c))) return true;
    return context.reliesOnP2pdma ? false : undefined;
  }
  const same = SAME_CAUSE[line.code] ?? [line.code];
  return same.some((c) => predictedCodes.includes(c));
}

/** A line as quoted in the report. */
export function quote(l: CuFileLogLine): string {
  return `${l.level} ${l.where} ${l.message}`;
}
