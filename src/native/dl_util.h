// Resolving optional and required symbols from a dlopen'ed library into typed slots.
#pragma once
#include <dlfcn.h>

#include <string>

namespace penstock {

// Fills `slot` with the symbol `name`; when absent and `missing` is given, appends the name to it.
template <typename Fn>
bool ResolveSymbol(void* lib, Fn& slot, const char* name, std::string* missing) {
  slot = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!slot && missing) *missing += (missing->empty() ? "" : ", ") + std::string(name);
  return slot != nullptr;
}

}  // namespace penstock
