// The cuFile task: cuFileRead/cuFileWrite straight between the file and GPU memory, continued on
// short counts, with both of cuFile's error conventions decoded.
#include <cerrno>

#include "sys/cufile_api.h"
#include "engine/device.h"
#include "engine/file_tasks.h"
#include "engine/staging_pipe.h"

namespace penstock {

ErrorRecord CuFileTransfer::Run(uint64_t index, uint64_t* done, bool* leftInFlight) {
  FlushWorkerPipes();  // a worker's staged reads left in flight are settled before other work
  uint64_t begin = TaskBegin(index), length = TaskLength(index);
  DeviceState* d = PreparedDevice(spec_.device);
  if (d) Cuda().CtxSetCurrent(d->ctx);
  const CuFileApi& cf = CuFile();
  for (uint64_t pos = begin; pos < begin + length;) {
    if (job().Stopped()) break;
    uint64_t n = begin + length - pos;
    uint64_t filePos = file_.fileOffset + pos;
    off_t bufOff = static_cast<off_t>(spec_.baseOffset + pos);
    void* base = reinterpret_cast<void*>(spec_.base);
    errno = 0;
    ssize_t r = file_.write ? cf.Write(spec_.handle, base, n, static_cast<off_t>(filePos), bufOff)
                            : cf.Read(spec_.handle, base, n, static_cast<off_t>(filePos), bufOff);
    int savedErrno = errno;
    if (r < 0) {
      IoFailure f = DecodeCuFileIoError(r, savedErrno);
      return f.cufile ? ErrorRecord::FromCuFile(f.code, file_.write ? "cuFileWrite" : "cuFileRead")
                      : ErrorRecord::Os(f.code, file_.write ? "cuFileWrite" : "cuFileRead");
    }
    if (r == 0) {
      if (file_.write) return ErrorRecord::Os(EIO, "cuFileWrite");
      NoteEof(filePos);
      break;
    }
    // Short counts are normal (end of file, or cuFile splitting the request): ask for the rest.
    pos += static_cast<uint64_t>(r);
    *done += static_cast<uint64_t>(r);
    job().AddProgress(r);
  }
  return {};
}

}  // namespace penstock
