// Probe: is a 1 MiB hot page-cache read faster split over spinning helper threads?
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
using clk = std::chrono::steady_clock;
static int fd; static char* dst; static const char* map; static uint64_t total;
static std::atomic<uint64_t> gen{0};
static std::atomic<uint32_t> nextPiece{0}, donePieces{0};
static uint64_t piece; static uint32_t pieces; static bool useMap;
static std::atomic<bool> quit{false};
static std::atomic<int> inside{0};
static int nHelpers = 15;
static void doPieces() {
  for (;;) {
    uint32_t i = nextPiece.fetch_add(1);
    if (i >= pieces) return;
    uint64_t at = i * piece, n = std::min(piece, total - at);
    if (useMap) memcpy(dst + at, map + at, n);
    else { struct iovec v{dst + at, n}; if (preadv2(fd, &v, 1, at, RWF_NOWAIT) != (ssize_t)n) abort(); }
    donePieces.fetch_add(1, std::memory_order_release);
  }
}
static void helper() {
  uint64_t seen = 0;
  while (!quit.load()) {
    uint64_t g = gen.load(std::memory_order_acquire);
    if (g == seen) { __builtin_ia32_pause(); continue; }
    seen = g; inside.fetch_add(1); doPieces(); inside.fetch_sub(1);
  }
}
int main(int argc, char** argv) {
  fd = open(argv[1], O_RDONLY); total = 1 << 20;
  dst = (char*)aligned_alloc(4096, total); memset(dst, 1, total);
  map = (const char*)mmap(nullptr, total, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  std::vector<std::thread> hs; if (argc > 2) nHelpers = atoi(argv[2]);
  for (int i = 0; i < nHelpers; ++i) hs.emplace_back(helper);
  // helpers: all 15 spin; we limit participation by pieces count
  for (int m = 0; m < 2; ++m) {
    useMap = m;
    for (uint64_t p : {1 << 20, 512 << 10, 256 << 10, 128 << 10, 64 << 10}) {
      piece = p; pieces = total / p;
      std::vector<double> t;
      for (int it = 0; it < (argc > 3 ? atoi(argv[3]) : 3000); ++it) {
        auto t0 = clk::now();
        nextPiece.store(0); donePieces.store(0);
        if (pieces > 1) gen.fetch_add(1, std::memory_order_release);
        doPieces();
        while (donePieces.load(std::memory_order_acquire) < pieces) __builtin_ia32_pause();
        t.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
        while (inside.load() != 0) __builtin_ia32_pause();
      }
      std::sort(t.begin(), t.end());
      printf("%s piece %4lu KiB (%2u pieces): p50 %.1f us p10 %.1f p90 %.1f\n", useMap ? "mmap+memcpy" : "preadv2   ", (unsigned long)(p >> 10), pieces, t[t.size() / 2], t[t.size() / 10], t[t.size() * 9 / 10]);
    }
  }
  quit = true; for (auto& h : hs) h.join();
}
