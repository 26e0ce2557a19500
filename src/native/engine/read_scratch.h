// FileTasks::ReadThroughScratch, shared by the host and staged tasks (posix_tasks.cc) and the
// gathered read (gather_read.cc): a template, so it lives where both can see it.
#pragma once
#include <algorithm>
#include <cerrno>

#include "engine/file_tasks.h"
#include "sys/posix_io.h"
#include "sys/stream_copy.h"

namespace penstock {

template <typename Arrived>
ErrorRecord FileTasks::ReadThroughScratch(char* dst, uint64_t filePos, uint64_t length, uint64_t piece, Arrived arrived) {
  char* scratch = Scratch(piece);
  if (!scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
  for (uint64_t pos = 0; pos < length && !job().Stopped();) {
    uint64_t n = std::min(piece, length - pos);
    int err = 0;
    ssize_t r;
    {
      StageTimer t(job().Work().ioNs);
      r = PreadFull(file_.fd, scratch, n, filePos + pos, false, &err);
    }
    if (r < 0) return ErrorRecord::Os(err, "pread");
    StreamCopy(dst + pos, scratch, r);
    arrived(static_cast<uint64_t>(r));
    if (static_cast<uint64_t>(r) < n) {
      NoteEof(filePos + pos + r);
      break;
    }
    pos += n;
  }
  return {};
}

}  // namespace penstock
