// The few checks the native unit tests share: a failed EXPECT prints its file, line and condition
// and is counted; Finish() reports the count and gives main()'s exit status.
#pragma once
#include <cstdio>
#include <cstdlib>

namespace check {

inline int g_failures = 0;

inline void Expect(bool ok, const char* what, const char* file, int line) {
  if (ok) return;
  std::fprintf(stderr, "%s:%d: %s\n", file, line, what);
  ++g_failures;
}

inline int Finish(const char* name) {
  if (g_failures) {
    std::fprintf(stderr, "%s: %d check(s) failed\n", name, g_failures);
    return EXIT_FAILURE;
  }
  std::printf("%s: all checks passed\n", name);
  return EXIT_SUCCESS;
}

}  // namespace check

#define EXPECT(cond) ::check::Expect((cond), #cond, __FILE__, __LINE__)
