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

/** What cuFile's messages mean, in the doctor's reason codes (first match wins). */
const EXPLAINERS: [RegExp, string][] = [
  [/udev property not found|error creating udev_device|udev_device_new/i, 'UDEV_NO_DATA'],
  [/Unsupported block device/i, 'DEVICE_MAPPER'],
  [/NVMe Driver not registered with nvidia-fs/i, 'NVME_NOT_SUPPORTED'],
  [/nvidia-fs\.ko driver not loaded|nvidia-fs driver not loaded|unable to open \/dev\/nvidia-fs/i, 'NO_NVIDIA_FS'],
  [/mount options? not (found|specified)|data=ordered/i, 'EXT4_NOT_DATA_ORDERED'],
  [/nvidia_peermem\.ko is not loaded/i, 'NO_NVIDIA_PEERMEM'],
  [/Inc-bar-usage failed|BAR1? (memory )?(exhausted|full)/i, 'BAR1_EXHAUSTED'],
  [/cuInit Failed|cuFile initialization failed/i, 'NO_CUDA'],
  [/denylist|blacklist|IO disabled/i, 'CUFILE_DENYLISTED'],
  [/force_compat_mode|forced compat/i, 'COMPAT_FORCED'],
  [/unsupported (file ?system|fs)|fs type .*not supported|filesystem not supported/i, 'FS_NOT_SUPPORTED'],
  [/p2pdma/i, 'P2PDMA'],
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

/**
 * Whether the prediction named the cause a line gives: `true`, `false` (cuFile names a cause the
 * prediction missed), or undefined when the line states an outcome rather than a cause.
 */
export function predictedBy(line: CuFileLogLine, predictedCodes: string[]): boolean | undefined {
  if (!line.code || line.code === 'CUFILE_COMPAT_FOR_FILE' || line.code === 'CUFILE_COMPAT_MODE') return undefined;
  const same = SAME_CAUSE[line.code] ?? [line.code];
  return same.some((c) => predictedCodes.includes(c));
}

/** A line as quoted in the report. */
export function quote(l: CuFileLogLine): string {
  return `${l.level} ${l.where} ${l.message}`;
}
