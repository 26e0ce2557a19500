// The O_DIRECT alignment arithmetic, free of I/O: which part of a byte range may go through an
// O_DIRECT descriptor, and which aligned span a direct read of it covers.
#pragma once
#include <algorithm>
#include <cstdint>

namespace penstock {

constexpr uint64_t kAlign = 4096;
inline uint64_t AlignDown(uint64_t v) { return v & ~(kAlign - 1); }
inline uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) & ~(kAlign - 1); }

// A write of [pos, pos+n): the aligned interior [interiorStart, interiorEnd) may go direct, the
// head [pos, interiorStart) and tail [interiorEnd, pos+n) go buffered.
struct DirectWriteSplit {
  uint64_t interiorStart;
  uint64_t interiorEnd;
  uint64_t headBytes;
  uint64_t tailBytes;
  // A range inside one page (or empty) has no aligned interior: all of it goes buffered.
  bool HasInterior() const { return interiorStart < interiorEnd; }
};

inline DirectWriteSplit SplitDirectWrite(uint64_t pos, uint64_t n) {
  uint64_t a = AlignUp(pos), b = AlignDown(pos + n);
  if (a >= b) return {a, a, n, 0};
  return {a, b, a - pos, pos + n - b};
}

// A direct read of [pos, pos+n) reads the enclosing aligned span [start, start+length); the
// requested bytes begin `slack` bytes into it.
struct DirectReadSpan {
  uint64_t start;
  uint64_t length;
  uint64_t slack;
};

inline DirectReadSpan EnclosingDirectSpan(uint64_t pos, uint64_t n) {
  uint64_t start = AlignDown(pos);
  return {start, AlignUp(pos + n) - start, pos - start};
}

// Of `read` bytes that arrived from the span's start, how many belong to the requested n.
inline uint64_t RequestedBytesRead(const DirectReadSpan& span, uint64_t n, uint64_t read) {
  return read > span.slack ? std::min<uint64_t>(n, read - span.slack) : 0;
}

}  // namespace penstock
