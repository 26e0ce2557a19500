// Unit checks of the O_DIRECT alignment arithmetic (src/native/sys/direct_span.h), built with a plain
// C++17 compiler and run by test/native/units.test.ts; exits non-zero when any check fails.
#include <cstdint>

#include "../../src/native/sys/direct_span.h"
#include "check.h"

namespace {

using penstock::kAlign;

void AlignHelpers() {
  EXPECT(penstock::AlignDown(0) == 0);
  EXPECT(penstock::AlignDown(kAlign - 1) == 0);
  EXPECT(penstock::AlignDown(kAlign) == kAlign);
  EXPECT(penstock::AlignUp(0) == 0);
  EXPECT(penstock::AlignUp(1) == kAlign);
  EXPECT(penstock::AlignUp(kAlign) == kAlign);
  EXPECT(penstock::AlignUp(kAlign + 1) == 2 * kAlign);
}

void WriteSplits() {
  // Aligned on both ends: all interior.
  auto w = penstock::SplitDirectWrite(kAlign, 3 * kAlign);
  EXPECT(w.HasInterior() && w.interiorStart == kAlign && w.interiorEnd == 4 * kAlign);
  EXPECT(w.headBytes == 0 && w.tailBytes == 0);
  // Unaligned head and tail around two whole pages.
  w = penstock::SplitDirectWrite(kAlign - 100, 2 * kAlign + 300);
  EXPECT(w.HasInterior() && w.interiorStart == kAlign && w.interiorEnd == 3 * kAlign);
  EXPECT(w.headBytes == 100 && w.tailBytes == 200);
  EXPECT(w.headBytes + (w.interiorEnd - w.interiorStart) + w.tailBytes == 2 * kAlign + 300);
  // Inside one page: no interior, everything buffered as the head.
  w = penstock::SplitDirectWrite(10, 100);
  EXPECT(!w.HasInterior() && w.headBytes == 100 && w.tailBytes == 0);
  // Crossing one page boundary without a whole page: still no interior.
  w = penstock::SplitDirectWrite(kAlign - 10, 20);
  EXPECT(!w.HasInterior() && w.headBytes == 20);
  // Empty range.
  w = penstock::SplitDirectWrite(5 * kAlign, 0);
  EXPECT(!w.HasInterior() && w.headBytes == 0 && w.tailBytes == 0);
  // Every split of a sweep of offsets and lengths covers the range exactly once.
  for (uint64_t pos = 0; pos < 3 * kAlign; pos += 511)
    for (uint64_t n = 0; n < 4 * kAlign; n += 977) {
      auto s = penstock::SplitDirectWrite(pos, n);
      uint64_t interior = s.HasInterior() ? s.interiorEnd - s.interiorStart : 0;
      EXPECT(s.headBytes + interior + s.tailBytes == n);
      if (s.HasInterior()) {
        EXPECT(s.interiorStart % kAlign == 0 && s.interiorEnd % kAlign == 0);
        EXPECT(s.interiorStart == pos + s.headBytes && s.interiorEnd + s.tailBytes == pos + n);
        EXPECT(s.headBytes < kAlign && s.tailBytes < kAlign);
      }
    }
}

void ReadSpans() {
  auto r = penstock::EnclosingDirectSpan(kAlign + 10, 100);
  EXPECT(r.start == kAlign && r.length == kAlign && r.slack == 10);
  r = penstock::EnclosingDirectSpan(kAlign - 1, 2);
  EXPECT(r.start == 0 && r.length == 2 * kAlign && r.slack == kAlign - 1);
  r = penstock::EnclosingDirectSpan(2 * kAlign, 2 * kAlign);
  EXPECT(r.start == 2 * kAlign && r.length == 2 * kAlign && r.slack == 0);
  // The span a read buffer must hold: never more than n + 2 pages.
  for (uint64_t pos = 0; pos < 2 * kAlign; pos += 313)
    for (uint64_t n = 1; n < 3 * kAlign; n += 701) {
      auto s = penstock::EnclosingDirectSpan(pos, n);
      EXPECT(s.start % kAlign == 0 && s.length % kAlign == 0);
      EXPECT(s.start + s.slack == pos && s.start + s.length >= pos + n);
      EXPECT(s.length <= n + 2 * kAlign);
    }
}

void BytesRead() {
  auto r = penstock::EnclosingDirectSpan(kAlign + 10, 100);
  EXPECT(penstock::RequestedBytesRead(r, 100, kAlign) == 100);  // whole span arrived
  EXPECT(penstock::RequestedBytesRead(r, 100, 60) == 50);       // end of file inside the range
  EXPECT(penstock::RequestedBytesRead(r, 100, 10) == 0);        // end of file at the range start
  EXPECT(penstock::RequestedBytesRead(r, 100, 0) == 0);         // nothing past the end
}

}  // namespace

int main() {
  AlignHelpers();
  WriteSplits();
  ReadSpans();
  BytesRead();
  return check::Finish("direct_span");
}
