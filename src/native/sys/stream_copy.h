// Copies that bypass the CPU caches on the way out. Reading a warm file into a large buffer is
// bound by memory traffic: a plain copy reads each destination line before writing it. Reading
// into a small cache-resident buffer first and then streaming it out with non-temporal stores
// moves a third fewer bytes through DRAM.
#pragma once
#include <cstddef>

namespace penstock {

// memcpy with non-temporal stores for the aligned middle (plain memcpy where unsupported).
// Ends with a store fence, so the data is visible to other threads afterwards.
void StreamCopy(void* dst, const void* src, size_t n);

}  // namespace penstock
