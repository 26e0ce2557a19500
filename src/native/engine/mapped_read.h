// The mapped share of a staged read: one worker registers the file's own page-cache pages with
// CUDA (through a read-only shared mapping) and the GPU copies straight out of them, with no CPU
// copy into a bounce buffer. Registration is slow and serialises in the driver, so it never
// carries a whole read: the runner takes pieces from the range's end while the staged runners
// take tasks from its front (task_claims.h), and the two meet wherever their speeds put the
// boundary.
#pragma once
#include <cstdint>
#include <mutex>

#include "sys/error_record.h"
#include "engine/file_tasks.h"
#include "engine/job.h"
#include "engine/work_counters.h"

namespace penstock {

class MappedRunner {
 public:
  // Maps the operation's range (on the main thread, before the runners start); a failure is
  // kept as the refusal, and the runner is then not Ready().
  explicit MappedRunner(const StagedSpec& spec);
  ~MappedRunner();
  MappedRunner(const MappedRunner&) = delete;
  MappedRunner& operator=(const MappedRunner&) = delete;

  bool Ready() const { return map_ != nullptr; }
  // Runs on one worker for the whole operation. Whatever is left when it stops (the ends met, a
  // refusal, a failure, a cancellation) it carries from the front like a staged runner, so the
  // operation needs no other runner to finish. `hold` keeps the operation from settling until
  // this share's time is added up.
  void Run(Job& op, DrainHold hold);

  // What it came to, read once the operation has drained.
  const WorkCounters& Work() const { return work_; }
  // Why the mapped share stopped early or never started (ok(): it did not).
  ErrorRecord Refusal() const;

 private:
  void Refuse(ErrorRecord e);

  const StagedSpec spec_;
  void* map_ = nullptr;  // the range's pages, never touched by the CPU
  uint64_t span_ = 0;
  uint64_t delta_ = 0;  // fileOffset's distance from the page-aligned start of the mapping
  WorkCounters work_;
  mutable std::mutex mutex_;
  ErrorRecord refusal_;
};

}  // namespace penstock
