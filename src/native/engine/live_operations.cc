#include "engine/live_operations.h"

#include <condition_variable>
#include <mutex>

namespace penstock {

namespace {
// Never destroyed: read by workers and by exit handlers until the very end.
std::mutex& g_liveMutex = *new std::mutex();
std::condition_variable& g_liveDrained = *new std::condition_variable();
int g_live = 0;
int g_background = 0;
bool g_exiting = false;
}  // namespace

int LiveOperations() {
  std::lock_guard<std::mutex> lock(g_liveMutex);
  return g_live;
}

void EnterLiveOperation() {
  std::lock_guard<std::mutex> lock(g_liveMutex);
  ++g_live;
}

void LeaveLiveOperation() {
  std::lock_guard<std::mutex> lock(g_liveMutex);
  if (--g_live == 0 && g_background == 0) g_liveDrained.notify_all();
}

bool EnterBackgroundWork() {
  std::lock_guard<std::mutex> lock(g_liveMutex);
  if (g_exiting) return false;
  ++g_background;
  return true;
}

void RefuseBackgroundWork() {
  std::lock_guard<std::mutex> lock(g_liveMutex);
  g_exiting = true;
}

void LeaveBackgroundWork() {
  std::lock_guard<std::mutex> lock(g_liveMutex);
  if (--g_background == 0 && g_live == 0) g_liveDrained.notify_all();
}

bool WaitForLiveOperations(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(g_liveMutex);
  return g_liveDrained.wait_for(lock, limit, [] { return g_live == 0 && g_background == 0; });
}

}  // namespace penstock
