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
// Waits until no operation is live, or `limit` passes; true when none is.
bool WaitForLiveOperations(std::chrono::milliseconds limit);

}  // namespace penstock
