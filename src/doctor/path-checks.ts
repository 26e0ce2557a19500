/**
 * The per-path checks as shown to people and scripts. Each fix sentence comes from the
 * prediction, so a reason is worded in one place only.
 */
import { leaves, type PathFacts } from './paths.js';
import type { Check, Finding, PlatformState, Prediction } from './types.js';

const BLOCK_FS = new Set(['ext4', 'xfs', 'ext3', 'ext2', 'btrfs', 'f2fs', 'vfat', 'exfat', 'ntfs', 'ntfs3']);

function describeDrive(f: PathFacts): string {
  const b = f.block!;
  const own = `${b.name} (${b.kind}${b.disk ? `, a partition of ${b.disk}` : ''}, ${b.majmin})`;
  if (!b.members) return own;
  return `${own} over ${leaves(b).map((m) => `${m.name} (${m.kind})`).join(', ')}`;
}

export function pathChecks(p: PlatformState, f: PathFacts, prediction: Prediction): Check[] {
  const checks: Check[] = [];
  const m = f.mount;
  checks.push({
    id: 'path.exists',
    status: f.exists ? (f.type === 'other' ? 'fail' : 'pass') : 'warn',
    title: 'Path',
    summary: f.exists
      ? `a ${f.type === 'other' ? 'special file (not regular)' : f.type}`
      : `does not exist (${f.statError}); examined ${f.examined}, where it would be created`,
    data: { exists: f.exists, type: f.type, examined: f.examined, error: f.statError },
  });
  checks.push({
    id: 'path.mount',
    status: m ? 'info' : 'fail',
    title: 'Mount',
    summary: m ? `${m.fsType} on ${m.mountPoint} from ${m.device} (${m.options.join(',')})` : 'not found in /proc/mounts',
    data: m ? { ...m } : {},
  });
  if (m) {
    const fsBlocker = prediction.blockers.find((b) => b.check === 'path.fs.supported');
    checks.push({
      id: 'path.fs.supported',
      status: fsBlocker ? 'fail' : 'pass',
      title: 'File system',
      summary: fsBlocker ? `${m.fsType}: no direct path` : `${m.fsType} can take the direct path`,
      data: { fsType: m.fsType },
    });
    if (m.fsType === 'ext4') {
      const ordered = m.options.includes('data=ordered');
      checks.push({
        id: 'path.fs.data_ordered',
        status: ordered ? 'pass' : 'fail',
        title: 'ext4 data=ordered',
        summary: ordered ? 'data=ordered is in the mount options' : `data=ordered is not among the mount options (ext4's default mode is not enough for cuFile)`,
        data: { options: m.options },
      });
    }
  }
  const blockBased = m ? BLOCK_FS.has(m.fsType) : false;
  checks.push({
    id: 'path.block_device',
    status: f.block ? (prediction.blockers.some((b) => b.check === 'path.block_device') ? 'fail' : 'pass') : blockBased ? 'warn' : 'info',
    title: 'Block device',
    summary: f.block ? describeDrive(f) : blockBased ? `not found for ${f.majmin ?? 'this file system'} in /sys/dev/block` : `none (${m?.fsType ?? 'unknown'} has no local block device)`,
    data: f.block ? { ...f.block } : { majmin: f.majmin },
  });
  const udevBlocker = prediction.blockers.find((b) => b.check === 'path.udev');
  checks.push({
    id: 'path.udev',
    status: udevBlocker ? 'fail' : f.udev ? 'pass' : 'info',
    title: 'udev data',
    summary: !p.udevDatabase
      ? 'no udev database (/run/udev/data)'
      : f.udev
        ? f.udev.present
          ? `${f.udev.file}: ID_FS_USAGE=${f.udev.usage ?? '(missing)'} ID_FS_TYPE=${f.udev.fsType ?? '(missing)'}`
          : `no ${f.udev.file}`
        : 'not needed (no block device)',
    data: f.udev ? { ...f.udev } : { database: p.udevDatabase },
  });
  const od = f.oDirect;
  checks.push({
    id: 'path.o_direct',
    status: od.state === 'ok' ? 'pass' : od.state === 'refused' ? 'fail' : 'info',
    title: 'O_DIRECT',
    summary: od.state === 'ok' ? 'an O_DIRECT open works' : od.state === 'refused' ? 'the file system refuses O_DIRECT opens (EINVAL)' : `not tested (${od.why})`,
    data: { ...od },
  });
  if (f.type === 'file' && f.exists)
    checks.push({
      id: 'path.flags',
      status: f.flags === undefined ? 'info' : f.flags.length ? 'fail' : 'pass',
      title: 'File flags',
      summary: f.flags === undefined ? 'not known (lsattr unavailable, or not recorded)' : f.flags.length ? f.flags.join(', ') : 'none that cuFile refuses (immutable, append-only, compressed, encrypted, verity)',
      data: { flags: f.flags ?? null },
    });
  const pc = f.pcie;
  checks.push({
    id: 'path.pcie',
    status: !pc ? 'info' : pc.relation === 'PIX' || pc.relation === 'PXB' ? 'pass' : 'warn',
    title: 'PCIe',
    summary: pc
      ? [`GPU ${pc.gpu} ↔ drive: ${pc.relation}`, ...pc.others.map((o) => `GPU ${o.gpu}: ${o.relation}`)].join('; ')
      : !f.block
        ? 'no local drive'
        : !leaves(f.block).some((d) => d.kind === 'nvme')
          ? 'not applicable (no local NVMe drive)'
          : !p.gpus.length
            ? 'no GPU to relate the drive to'
            : 'unknown (the drive or the GPU has no PCI location in sysfs)',
    data: pc ? { gpu: pc.gpu, relation: pc.relation, bridges: pc.bridges, others: pc.others } : {},
  });
  if (pc) {
    const unreadable = pc.acs.filter((a) => a.state === 'unreadable');
    const redirect = pc.acs.filter((a) => a.state === 'redirect');
    const noCap = pc.acs.filter((a) => a.state === 'no-capability').map((a) => a.bridge);
    checks.push({
      id: 'path.acs',
      status: redirect.length ? 'warn' : unreadable.length ? 'info' : 'pass',
      title: 'ACS',
      summary: pc.acs.length === 0
        ? 'no bridges between the GPU and the drive'
        : redirect.length
          ? `redirect on ${redirect.map((a) => a.bridge).join(', ')}`
          : unreadable.length
            ? `config space of ${unreadable.map((a) => a.bridge).join(', ')} not readable beyond 64 bytes (run as root to see ACS)`
            : `off on ${pc.acs.filter((a) => a.state === 'off').map((a) => a.bridge).join(', ') || 'none'}${noCap.length ? ` (no ACS capability: ${noCap.join(', ')})` : ''}`,
      data: { bridges: pc.acs },
    });
  }
  attachFixes(checks, [...prediction.blockers, ...prediction.warnings]);
  return checks;
}

/** Gives each check the first sentence aimed at it, unless it has its own. */
export function attachFixes(checks: Check[], findings: Finding[]): void {
  for (const c of checks) {
    if (c.fix) continue;
    const f = findings.find((x) => x.check === c.id);
    if (f) c.fix = f.message;
  }
}
