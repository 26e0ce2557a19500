// How many operations of every environment still have tasks running. The engine asks before it
// replaces memory that running tasks may be using; the JS side counts operations in and out and
// waits for the count to fall to zero at exit.
#pragma once
#include <chrono>

namespace penstock {

// Any thread.
int LiveOperations();
void EnterLiveOperation();
// The last one out wakes WaitForLiveOperations.
void LeaveLiveOperation();
// Work on a background thread that is not an operation (a driver's load, a device's pinned
// memory, cuFile's driver open): the process's exit waits for it as it does for operations.
// False once the process has begun to exit: the work must then not start.
bool EnterBackgroundWork();
void LeaveBackgroundWork();
// From the process's exit on, no background work starts.
void RefuseBackgroundWork();
// Waits until no operation and no background work is live, or `limit` passes; true when none is.
bool WaitForLiveOperations(std::chrono::milliseconds limit);

}  // namespace penstock
