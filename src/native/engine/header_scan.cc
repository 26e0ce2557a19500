#include "engine/header_scan.h"

#include <algorithm>
#include <functional>

namespace penstock {

namespace {

// Well-formed UTF-8 as a fatal decoder takes it: no overlong forms, no surrogates, nothing
// past U+10FFFF.
bool ValidUtf8(const uint8_t* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t extra;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) extra = 1;
    else if (c == 0xE0) extra = 2, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) extra = 2;
    else if (c == 0xED) extra = 2, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF) extra = 2;
    else if (c == 0xF0) extra = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) extra = 3;
    else if (c == 0xF4) extra = 3, hi = 0x8F;
    else return false;
    if (n - i <= extra) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (size_t k = 2; k <= extra; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
    i += extra + 1;
  }
  return true;
}

class Scanner {
 public:
  Scanner(const uint8_t* p, size_t n, HeaderScan* out) : p_(p), n_(n), out_(out) {}

  bool Header() {
    HeaderScan* out = out_;
    if (n_ == 0 || p_[0] != '{') return false;
    ++i_;
    Ws();
    if (At('}')) return Tail(i_ + 1);
    for (;;) {
      Ws();
      std::string_view key;
      if (!String(&key)) return false;
      out->keys.push_back(key);
      Ws();
      if (!Take(':')) return false;
      Ws();
      if (key == "__metadata__") {
        size_t at = i_;
        if (!SkipValue()) return false;
        out->hasMetadata = true;
        out->metadataAt = at;
        out->metadataLength = i_ - at;
      } else {
        if (AllDigits(key)) return false;  // JavaScript orders such keys first; the strict reader keeps that order
        ScannedTensor t;
        t.nameAt = static_cast<uint32_t>(key.data() - reinterpret_cast<const char*>(p_));
        t.nameLength = static_cast<uint32_t>(key.size());
        if (!Entry(&t, out)) return false;
        out->tensors.push_back(t);
      }
      Ws();
      if (Take(',')) continue;
      if (At('}')) return Tail(i_ + 1) && Distinct();
      return false;
    }
  }

 private:
  // No key of the header twice: an open-addressed table of indexes into the keys (no allocation
  // per key, as a node-based set would make).
  bool Distinct() const {
    const std::vector<std::string_view>& keys = out_->keys;
    std::vector<uint32_t>& slots = out_->slots;  // index + 1; 0 is empty
    size_t size = 16;
    while (size < 2 * keys.size()) size *= 2;
    slots.assign(size, 0);
    std::hash<std::string_view> hash;
    for (uint32_t k = 0; k < keys.size(); ++k) {
      for (size_t at = hash(keys[k]) & (size - 1);; at = (at + 1) & (size - 1)) {
        if (!slots[at]) {
          slots[at] = k + 1;
          break;
        }
        if (keys[slots[at] - 1] == keys[k]) return false;
      }
    }
    return true;
  }

  bool At(char c) const { return i_ < n_ && p_[i_] == static_cast<uint8_t>(c); }
  bool Take(char c) {
    if (!At(c)) return false;
    ++i_;
    return true;
  }
  void Ws() {
    while (i_ < n_ && (p_[i_] == ' ' || p_[i_] == '\n' || p_[i_] == '\r' || p_[i_] == '\t')) ++i_;
  }
  // After the object: JSON whitespace only (writers pad with spaces).
  bool Tail(size_t from) {
    for (size_t k = from; k < n_; ++k)
      if (p_[k] != ' ' && p_[k] != '\n' && p_[k] != '\r' && p_[k] != '\t') return false;
    return true;
  }
  static bool AllDigits(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
      if (c < '0' || c > '9') return false;
    return true;
  }

  // A string without escapes or control characters.
  bool String(std::string_view* s) {
    if (!Take('"')) return false;
    size_t at = i_;
    while (i_ < n_ && p_[i_] != '"') {
      if (p_[i_] < 0x20 || p_[i_] == '\\') return false;
      ++i_;
    }
    if (i_ >= n_) return false;
    *s = std::string_view(reinterpret_cast<const char*>(p_ + at), i_ - at);
    ++i_;
    return true;
  }

  // A non-negative integer of at most 15 digits, without leading zeros.
  bool Integer(uint64_t* v) {
    size_t at = i_;
    uint64_t x = 0;
    while (i_ < n_ && p_[i_] >= '0' && p_[i_] <= '9') x = x * 10 + (p_[i_++] - '0');
    size_t digits = i_ - at;
    if (digits == 0 || digits > 15 || (digits > 1 && p_[at] == '0')) return false;
    *v = x;
    return true;
  }

  bool Entry(ScannedTensor* t, HeaderScan* out) {
    if (!Take('{')) return false;
    bool dtype = false, shape = false, offsets = false;
    for (;;) {
      Ws();
      std::string_view key;
      if (!String(&key)) return false;
      Ws();
      if (!Take(':')) return false;
      Ws();
      if (key == "dtype" && !dtype) {
        std::string_view d;
        if (!String(&d)) return false;
        uint32_t k = 0;
        while (k < out->dtypes.size() && out->dtypes[k] != d) ++k;
        if (k == out->dtypes.size()) out->dtypes.push_back(d);
        t->dtype = k;
        dtype = true;
      } else if (key == "shape" && !shape) {
        t->firstDim = static_cast<uint32_t>(out->dims.size());
        if (!Take('[')) return false;
        Ws();
        if (!Take(']')) {
          for (;;) {
            uint64_t d;
            if (!Integer(&d)) return false;
            out->dims.push_back(d);
            Ws();
            if (Take(']')) break;
            if (!Take(',')) return false;
            Ws();
          }
        }
        t->rank = static_cast<uint32_t>(out->dims.size() - t->firstDim);
        shape = true;
      } else if (key == "data_offsets" && !offsets) {
        if (!Take('[')) return false;
        Ws();
        if (!Integer(&t->begin)) return false;
        Ws();
        if (!Take(',')) return false;
        Ws();
        if (!Integer(&t->end)) return false;
        Ws();
        if (!Take(']')) return false;
        offsets = true;
      } else {
        return false;
      }
      Ws();
      if (Take(',')) continue;
      if (Take('}')) return dtype && shape && offsets;
      return false;
    }
  }

  // Steps over one JSON value without reading it (the metadata, which the caller reads strictly):
  // strings with their escapes, and brackets to the one that closes the first.
  bool SkipValue() {
    int depth = 0;
    do {
      if (i_ >= n_) return false;
      uint8_t c = p_[i_];
      if (c == '"') {
        ++i_;
        while (i_ < n_ && p_[i_] != '"') {
          if (p_[i_] < 0x20) return false;
          i_ += p_[i_] == '\\' ? 2 : 1;
        }
        if (i_ >= n_) return false;
        ++i_;
      } else if (c == '{' || c == '[') {
        if (++depth > 64) return false;
        ++i_;
      } else if (c == '}' || c == ']') {
        if (--depth < 0) return false;
        ++i_;
      } else if (depth == 0) {
        // A scalar: up to the next delimiter.
        while (i_ < n_ && p_[i_] != ',' && p_[i_] != '}' && p_[i_] != ' ' && p_[i_] != '\n' && p_[i_] != '\r' && p_[i_] != '\t') ++i_;
      } else {
        ++i_;
      }
    } while (depth > 0);
    return true;
  }

  const uint8_t* p_;
  size_t n_;
  size_t i_ = 0;
  HeaderScan* out_;
};

}  // namespace

bool ScanSafetensorsHeader(const uint8_t* text, size_t length, HeaderScan* out) {
  out->tensors.clear();
  out->dtypes.clear();
  out->dims.clear();
  out->keys.clear();
  out->hasMetadata = false;
  out->metadataAt = out->metadataLength = 0;
  out->ascii = true;
  // Offsets of names are kept in 32 bits; a header is at most 100 MB.
  if (length > UINT32_MAX) return false;
  for (size_t k = 0; k < length; ++k)
    if (text[k] >= 0x80) {
      out->ascii = false;
      break;
    }
  if (!out->ascii && !ValidUtf8(text, length)) return false;
  return Scanner(text, length, out).Header();
}

}  // namespace penstock
