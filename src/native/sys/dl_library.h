// The one dlopen/dlsym skeleton behind the CUDA and cuFile shims: open once, fill typed slots,
// record what was absent as data (never as an error at the time of use).
#pragma once
#include <dlfcn.h>

#include <string>

namespace penstock {

// What every run-time-loaded library reports, whatever it is.
struct LibraryState {
  bool attempted = false;
  bool loaded = false;
  std::string path;
  std::string resolvedPath;
  std::string loadError;
  std::string missing;  // comma-separated required symbols that were absent
};

// A library opened for the life of the process: the handle is never closed on purpose, because
// pool workers and exit handlers call into it until the process is gone.
class DlLibrary {
 public:
  // dlopen with RTLD_LOCAL: the library is ours to call, not a symbol provider for others.
  bool Open(LibraryState& state) {
    handle_ = dlopen(state.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* err = dlerror();
      state.loadError = err ? err : "dlopen failed";
    }
    return handle_ != nullptr;
  }

  // Fills `slot`; when absent and `absent` is given, appends the name to that list.
  template <typename Fn>
  bool Resolve(Fn& slot, const char* name, std::string* absent) {
    slot = reinterpret_cast<Fn>(dlsym(handle_, name));
    if (!slot && absent) *absent += (absent->empty() ? "" : ", ") + std::string(name);
    return slot != nullptr;
  }

  // Finishes a load: the file the symbol `probe` came from, and loaded only when nothing required
  // is missing.
  template <typename Fn>
  static bool Finish(LibraryState& state, Fn probe, const char* what) {
    Dl_info info;
    if (probe && dladdr(reinterpret_cast<void*>(probe), &info) && info.dli_fname)
      state.resolvedPath = info.dli_fname;
    if (!state.missing.empty()) {
      state.loadError = std::string("the ") + what + " library lacks required functions: " + state.missing;
      return false;
    }
    state.loaded = true;
    return true;
  }

 private:
  void* handle_ = nullptr;
};

}  // namespace penstock
