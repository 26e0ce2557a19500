// Failures as plain data, so worker threads can describe them without touching JS (errors.h
// turns a record into a JS value on the main thread).
#pragma once
#include <string>

#include "sys/cuda_api.h"

namespace penstock {

struct ErrorRecord {
  enum class Kind { None, Os, Cuda, CuFile, Penstock, Abort };
  Kind kind = Kind::None;
  std::string code;
  std::string message;
  int number = 0;  // errno, CUresult or cuFile code
  std::string syscall;

  bool ok() const { return kind == Kind::None; }
  static ErrorRecord Os(int err, const char* syscall);
  static ErrorRecord FromCuda(CUresult r, const char* call);
  static ErrorRecord FromCuFile(int code, const char* call);
  static ErrorRecord Misuse(const char* code, std::string message);
  static ErrorRecord Aborted();
};

std::string CuFileErrorName(int code);

inline ErrorRecord CudaCallRecord(CUresult r, const char* call) {
  return r == CUDA_SUCCESS ? ErrorRecord{} : ErrorRecord::FromCuda(r, call);
}

}  // namespace penstock

// Makes one driver call through its CudaApi slot and names a failure after that slot, so a record
// can only name the call that failed: PENSTOCK_CUDA(EventRecord, ev, stream) fails as
// "cuEventRecord". Gives an ErrorRecord, ok() on success.
#define PENSTOCK_CUDA(Fn, ...) ::penstock::CudaCallRecord(::penstock::Cuda().Fn(__VA_ARGS__), "cu" #Fn)
