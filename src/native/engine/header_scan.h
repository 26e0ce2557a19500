// A safetensors header in the form its writers produce, read in one pass: a JSON object of
// tensor entries ({"dtype": "...", "shape": [...], "data_offsets": [b, e]}) and an optional
// __metadata__. A header of 15 000 tensors is read here in about a millisecond, where parsing it
// as generic JSON in JavaScript and walking the result costs tens. Only the plain form is taken:
// names and dtypes without escapes, integers of at most 15 digits (all exact in a double), no
// other keys, no duplicate name. Anything else is left to the strict reader in
// src/formats/safetensors.ts, which also words every error; this scan never refuses a header,
// it only declines to read it. The meaning of the fields (known dtypes, sizes, offsets inside
// the data) is checked by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace penstock {

// One tensor entry, by where its parts are: the name as a byte range of the header.
struct ScannedTensor {
  uint32_t nameAt = 0;
  uint32_t nameLength = 0;
  uint32_t dtype = 0;     // index into HeaderScan::dtypes
  uint32_t firstDim = 0;  // dims [firstDim, firstDim + rank) of HeaderScan::dims
  uint32_t rank = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct HeaderScan {
  // In header order.
  std::vector<ScannedTensor> tensors;
  // The distinct dtype strings, in the order first seen.
  std::vector<std::string_view> dtypes;
  std::vector<uint64_t> dims;
  // The __metadata__ value's byte range (its JSON text, unread); hasMetadata false when absent.
  bool hasMetadata = false;
  size_t metadataAt = 0;
  size_t metadataLength = 0;
  // Every byte of the header is below 0x80.
  bool ascii = true;
  // Every key of the header (names and __metadata__), for the duplicate check.
  std::vector<std::string_view> keys;
  std::vector<uint32_t> slots;
};

// Reads `text` (the header length's bytes after the file's first 8: the JSON and its padding)
// into `out`. False where the header is not in the plain form, or is not valid JSON or UTF-8:
// the caller then reads it the strict way. `out`'s vectors are cleared, not freed: a caller that
// scans again with the same object reuses their memory (a large header's columns are MBs, and
// fresh memory costs a page fault per 4 KiB).
bool ScanSafetensorsHeader(const uint8_t* text, size_t length, HeaderScan* out);

}  // namespace penstock
