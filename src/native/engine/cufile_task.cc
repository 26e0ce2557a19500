// The cuFile task: cuFileRead/cuFileWrite straight between the file and GPU memory, continued on
// short counts, with both of cuFile's error conventions decoded.
#include <cerrno>

#include "sys/cufile_api.h"
#include "engine/device.h"
#include "engine/io_op.h"

namespace penstock {

ErrorRecord Operation::CuFileTask(uint64_t begin, uint64_t length, uint64_t* done) {
  DeviceState* d = PreparedDevice(spec_.device);
  if (d) Cuda().CtxSetCurrent(d->ctx);
  const CuFileApi& cf = CuFile();
  for (uint64_t pos = begin; pos < begin + length;) {
    if (Stopped()) break;
    uint64_t n = begin + length - pos;
    uint64_t filePos = spec_.fileOffset + pos;
    off_t bufOff = static_cast<off_t>(spec_.cufileBaseOffset + pos);
    void* base = reinterpret_cast<void*>(spec_.cufileBase);
    errno = 0;
    ssize_t r = spec_.write ? cf.Write(spec_.cufile, base, n, static_cast<off_t>(filePos), bufOff)
                            : cf.Read(spec_.cufile, base, n, static_cast<off_t>(filePos), bufOff);
    int savedErrno = errno;
    if (r < 0) {
      IoFailure f = DecodeCuFileIoError(r, savedErrno);
      return f.cufile ? ErrorRecord::FromCuFile(f.code, spec_.write ? "cuFileWrite" : "cuFileRead")
                      : ErrorRecord::Os(f.code, spec_.write ? "cuFileWrite" : "cuFileRead");
    }
    if (r == 0) {
      if (spec_.write) return ErrorRecord::Os(EIO, "cuFileWrite");
      NoteEof(filePos);
      break;
    }
    // Short counts are normal (end of file, or cuFile splitting the request): ask for the rest.
    pos += static_cast<uint64_t>(r);
    *done += static_cast<uint64_t>(r);
    AddProgress(r);
  }
  return {};
}

}  // namespace penstock
