/**
 * Just enough of ELF64 (little-endian) to check a prebuilt addon: its machine, its dynamic
 * symbols and the glibc symbol versions it needs. No binutils needed.
 */
import fs from 'node:fs';

/** EM_X86_64 and EM_AARCH64, as e_machine holds them. */
export const MACHINES = { x64: 62, arm64: 183 } as const;

/** What a prebuilt addon's file says about itself. */
export interface ElfFacts {
  /** e_machine. */
  machine: number;
  /** ET_DYN (3) for a shared object. */
  type: number;
  /** Global names in .dynsym that the file defines (section index not SHN_UNDEF). */
  exported: string[];
  /** Version names the file needs, per library (from .gnu.version_r), e.g. libc.so.6 → GLIBC_2.34. */
  needs: Record<string, string[]>;
  /** Symbols the file takes from elsewhere: weak or not, and the version asked for (none: any). */
  imported: { name: string; weak: boolean; version?: string }[];
}

interface Section {
  type: number;
  offset: number;
  size: number;
  link: number;
  entsize: number;
  info: number;
}

/** Reads a 64-bit little-endian ELF file's machine, exported symbols and needed versions. */
export function readElf(file: string): ElfFacts {
  const b = fs.readFileSync(file);
  if (b.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${file}: not an ELF file`);
  if (b[4] !== 2 || b[5] !== 1) throw new Error(`${file}: not 64-bit little-endian ELF`);
  const type = b.readUInt16LE(16);
  const machine = b.readUInt16LE(18);
  const shoff = Number(b.readBigUInt64LE(40));
  const shentsize = b.readUInt16LE(58);
  const shnum = b.readUInt16LE(60);
  const sections: Section[] = [];
  for (let i = 0; i < shnum; i++) {
    const o = shoff + i * shentsize;
    sections.push({
      type: b.readUInt32LE(o + 4),
      offset: Number(b.readBigUInt64LE(o + 24)),
      size: Number(b.readBigUInt64LE(o + 32)),
      link: b.readUInt32LE(o + 40),
      info: b.readUInt32LE(o + 44),
      entsize: Number(b.readBigUInt64LE(o + 56)),
    });
  }
  const str = (tab: Section, at: number) => {
    const start = tab.offset + at;
    return b.toString('latin1', start, b.indexOf(0, start));
  };
  const needs: Record<string, string[]> = {};
  const versionNames = new Map<number, string>(); // vna_other → version name
  const verneed = sections.find((s) => s.type === 0x6ffffffe); // SHT_GNU_verneed
  if (verneed) {
    const names = sections[verneed.link]!;
    let o = verneed.offset;
    for (let n = 0; n < verneed.info; n++) {
      const cnt = b.readUInt16LE(o + 2);
      const lib = str(names, b.readUInt32LE(o + 4));
      const list: string[] = (needs[lib] = []);
      let a = o + b.readUInt32LE(o + 8);
      for (let k = 0; k < cnt; k++) {
        list.push(str(names, b.readUInt32LE(a + 8)));
        versionNames.set(b.readUInt16LE(a + 6), list[list.length - 1]!);
        a += b.readUInt32LE(a + 12);
      }
      o += b.readUInt32LE(o + 12);
    }
  }
  const exported: string[] = [];
  const imported: ElfFacts['imported'] = [];
  const dynsym = sections.find((s) => s.type === 11); // SHT_DYNSYM
  const versym = sections.find((s) => s.type === 0x6fffffff); // SHT_GNU_versym: one u16 per symbol
  if (dynsym) {
    const names = sections[dynsym.link]!;
    for (let i = 1, o = dynsym.offset + dynsym.entsize; o < dynsym.offset + dynsym.size; i++, o += dynsym.entsize) {
      const name = str(names, b.readUInt32LE(o));
      if (b.readUInt16LE(o + 6) !== 0) {
        if (b[o + 4]! >> 4 !== 0) exported.push(name); // not STB_LOCAL (section symbols are)
      } else {
        const v = versym ? b.readUInt16LE(versym.offset + 2 * i) & 0x7fff : 1;
        imported.push({ name, weak: b[o + 4]! >> 4 === 2, version: v > 1 ? versionNames.get(v) : undefined });
      }
    }
  }
  return { machine, type, exported, needs, imported };
}

/** The newest GLIBC_x.y among the versions needed, as [x, y]. */
export function newestGlibc(facts: ElfFacts): [number, number] | undefined {
  let best: [number, number] | undefined;
  for (const v of Object.values(facts.needs).flat()) {
    const m = /^GLIBC_(\d+)\.(\d+)/.exec(v);
    if (!m) continue;
    const ver: [number, number] = [Number(m[1]), Number(m[2])];
    if (!best || ver[0] > best[0] || (ver[0] === best[0] && ver[1] > best[1])) best = ver;
  }
  return best;
}
