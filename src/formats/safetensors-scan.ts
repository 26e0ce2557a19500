/**
 * The fast reader of safetensors headers: the addon scans a header in the plain form writers
 * produce (engine/header_scan.h) into columns, and every entry is checked here as the strict
 * reader checks it. Anything the scan declines, and any header that fails a check, is left to
 * the strict reader (safetensors.ts), so that every error is worded in one place.
 */
import { native, type NativeAddon, type NativeHeaderScan } from '../addon/binding.js';
import { DTYPES, isDtype, type Dtype } from './dtypes.js';
import { addEntry, checkMetadata, entryColumns, type EntryColumns } from './safetensors-entries.js';
import { parseStrictJson } from './strict-json.js';

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The header's entries as the scan reads them, every one checked; undefined where the scan declines or any check fails. */
export function scannedEntries(json: Uint8Array, dataLength: number, path: string | undefined): EntryColumns | undefined {
  const scan = headerScanner()?.(json);
  if (!scan) return undefined;
  try {
    const names = namesOf(scan.names);
    // The dtype names as the module's own strings: a string made by the addon is not
    // internalized, and every lookup keyed by it (sizes, typed arrays) would take a slow path.
    const dtypes: Dtype[] = [];
    for (const d of scan.dtypes) {
      if (!isDtype(d)) return undefined;
      dtypes.push(DTYPES[DTYPES.indexOf(d)]!);
    }
    if (names.length !== scan.count) return undefined;
    const c = checkedEntries(scan, names, dtypes, dataLength, path);
    if (scan.metadataAt !== undefined) {
      const text = utf8.decode(json.subarray(scan.metadataAt, scan.metadataAt + scan.metadataLength!));
      c.metadata = checkMetadata(parseStrictJson(text), path);
    }
    return c;
  } catch {
    return undefined;
  }
}

/** The names from the scan's strings of them (a pass of its own, as {@link checkedEntries}). */
function namesOf(chunks: readonly string[]): string[] {
  const names: string[] = [];
  for (const chunk of chunks) for (const name of chunk.split('\n')) names.push(name);
  return names;
}

/**
 * Every scanned tensor, checked. Its own function, returning as its loop ends: V8 optimises a
 * long loop while it runs, and code after the loop that had not yet run would then deoptimise it
 * on every load (a function called once per load never stays optimised).
 */
function checkedEntries(scan: NativeHeaderScan, names: readonly string[], dtypes: readonly Dtype[], dataLength: number, path: string | undefined): EntryColumns {
  const { count, dtype, rank, dims, offsets } = scan;
  const c = entryColumns();
  let at = 0;
  for (let k = 0; k < count; k++) {
    const shape = shapeAt(dims, at, rank[k]!);
    at += rank[k]!;
    addEntry(c, names[k]!, dtypes[dtype[k]!]!, shape, small(offsets[2 * k]!), small(offsets[2 * k + 1]!), dataLength, path);
  }
  return c;
}

/**
 * A number read from a Float64Array, as a small integer where it is one. Read there, even an
 * integer is a heap number until the code is optimised, and the objects and arrays that hold such
 * numbers keep them as doubles: every later use then allocates, and planning a load of 15 000
 * tensors took twice as long in a fresh process. A bitwise operation gives V8's small integer.
 */
function small(v: number): number {
  return v < 0x80000000 ? v | 0 : v;
}

/** A shape from the scan's dimensions, as an array of exactly its length (most have one to three). */
function shapeAt(dims: Float64Array, at: number, rank: number): number[] {
  switch (rank) {
    case 0:
      return [];
    case 1:
      return [small(dims[at]!)];
    case 2:
      return [small(dims[at]!), small(dims[at + 1]!)];
    case 3:
      return [small(dims[at]!), small(dims[at + 1]!), small(dims[at + 2]!)];
    default:
      return Array.from(dims.subarray(at, at + rank), small);
  }
}

let scanner: NativeAddon['scanSafetensorsHeader'] | null | undefined;

/** The addon's header scan, or null where the addon does not load (headers are then read in JavaScript). */
function headerScanner(): NativeAddon['scanSafetensorsHeader'] | null {
  if (scanner === undefined) {
    try {
      scanner = native().scanSafetensorsHeader;
    } catch {
      scanner = null;
    }
  }
  return scanner;
}
