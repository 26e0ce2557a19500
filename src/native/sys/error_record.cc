#include "sys/error_record.h"

#include <cerrno>
#include <cstring>

namespace penstock {

namespace {
struct CuFileName {
  int code;
  const char* name;
};
// Names follow cuFile's CU_FILE_* enumeration (base 5000).
constexpr CuFileName kCuFileNames[] = {
    {5001, "CU_FILE_DRIVER_NOT_INITIALIZED"}, {5002, "CU_FILE_DRIVER_INVALID_PROPS"},
    {5003, "CU_FILE_DRIVER_UNSUPPORTED_LIMIT"}, {5004, "CU_FILE_DRIVER_VERSION_MISMATCH"},
    {5005, "CU_FILE_DRIVER_VERSION_READ_ERROR"}, {5006, "CU_FILE_DRIVER_CLOSING"},
    {5007, "CU_FILE_PLATFORM_NOT_SUPPORTED"}, {5008, "CU_FILE_IO_NOT_SUPPORTED"},
    {5009, "CU_FILE_DEVICE_NOT_SUPPORTED"}, {5010, "CU_FILE_NVFS_DRIVER_ERROR"},
    {5011, "CU_FILE_CUDA_DRIVER_ERROR"}, {5012, "CU_FILE_CUDA_POINTER_INVALID"},
    {5013, "CU_FILE_CUDA_MEMORY_TYPE_INVALID"}, {5014, "CU_FILE_CUDA_POINTER_RANGE_ERROR"},
    {5015, "CU_FILE_CUDA_CONTEXT_MISMATCH"}, {5016, "CU_FILE_INVALID_MAPPING_SIZE"},
    {5017, "CU_FILE_INVALID_MAPPING_RANGE"}, {5018, "CU_FILE_INVALID_FILE_TYPE"},
    {5019, "CU_FILE_INVALID_FILE_OPEN_FLAG"}, {5020, "CU_FILE_DIO_NOT_SET"},
    {5022, "CU_FILE_INVALID_VALUE"}, {5023, "CU_FILE_MEMORY_ALREADY_REGISTERED"},
    {5024, "CU_FILE_MEMORY_NOT_REGISTERED"}, {5025, "CU_FILE_PERMISSION_DENIED"},
    {5026, "CU_FILE_DRIVER_ALREADY_OPEN"}, {5027, "CU_FILE_HANDLE_NOT_REGISTERED"},
    {5028, "CU_FILE_HANDLE_ALREADY_REGISTERED"}, {5029, "CU_FILE_DEVICE_NOT_FOUND"},
    {5030, "CU_FILE_INTERNAL_ERROR"}, {5031, "CU_FILE_GETNEWFD_FAILED"},
    {5033, "CU_FILE_NVFS_SETUP_ERROR"}, {5034, "CU_FILE_IO_DISABLED"},
    {5035, "CU_FILE_BATCH_SUBMIT_FAILED"}, {5036, "CU_FILE_GPU_MEMORY_PINNING_FAILED"},
    {5037, "CU_FILE_BATCH_FULL"}, {5038, "CU_FILE_ASYNC_NOT_SUPPORTED"},
    {5043, "CU_FILE_NOMEM"}, {5044, "CU_FILE_IO_ERROR"}, {5047, "CU_FILE_INVALID_CONTEXT"},
    {5049, "CU_FILE_BATCH_NOCOMPAT"},
};

const char* ErrnoName(int err) {
  switch (err) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EIO: return "EIO";
    case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case EISDIR: return "EISDIR";
    case EINVAL: return "EINVAL";
    case ENFILE: return "ENFILE";
    case EMFILE: return "EMFILE";
    case EFBIG: return "EFBIG";
    case ENOSPC: return "ENOSPC";
    case ESPIPE: return "ESPIPE";
    case EROFS: return "EROFS";
    case ENXIO: return "ENXIO";
    case EOVERFLOW: return "EOVERFLOW";
    case EINTR: return "EINTR";
    case EDQUOT: return "EDQUOT";
    case ENOTSUP: return "ENOTSUP";
    default: return nullptr;
  }
}
}  // namespace

std::string CuFileErrorName(int code) {
  for (const auto& n : kCuFileNames)
    if (n.code == code) return n.name;
  return "CU_FILE_ERROR_" + std::to_string(code);
}

ErrorRecord ErrorRecord::Os(int err, const char* syscall) {
  ErrorRecord e;
  e.kind = Kind::Os;
  const char* name = ErrnoName(err);
  e.code = name ? name : ("E" + std::to_string(err));
  char buf[256];
  // GNU strerror_r returns the message pointer, which may not be buf.
  const char* msg = strerror_r(err, buf, sizeof buf);
  e.message = msg;
  e.number = err;
  e.syscall = syscall;
  return e;
}

ErrorRecord ErrorRecord::FromCuda(CUresult r, const char* call) {
  ErrorRecord e;
  e.kind = Kind::Cuda;
  e.code = CudaErrorName(r);
  e.message = std::string(call) + " failed: " + CudaErrorString(r);
  e.number = r;
  e.syscall = call;
  return e;
}

ErrorRecord ErrorRecord::FromCuFile(int code, const char* call) {
  ErrorRecord e;
  e.kind = Kind::CuFile;
  e.code = CuFileErrorName(code);
  e.message = std::string(call) + " failed with " + e.code + " (" + std::to_string(code) + ")";
  e.number = code;
  e.syscall = call;
  return e;
}

ErrorRecord ErrorRecord::Misuse(const char* code, std::string message) {
  ErrorRecord e;
  e.kind = Kind::Penstock;
  e.code = code;
  e.message = std::move(message);
  return e;
}

ErrorRecord ErrorRecord::Aborted() {
  ErrorRecord e;
  e.kind = Kind::Abort;
  e.code = "ABORT_ERR";
  e.message = "The operation was aborted";
  return e;
}

}  // namespace penstock
