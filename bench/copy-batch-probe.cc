// How many scattered copies of 4 KiB from pinned memory into a GPU the driver takes per second,
// issued a call each (cuMemcpyHtoDAsync_v2) or as one cuMemcpyBatchAsync_v2 per fill of N, from
// T threads with a stream each; first, whether the batch call lands every byte where it should.
// The figures behind batch-plan.ts COPY_BATCH_MIN (bench/history/results/copy-batch-probe-h200.txt).
// Standalone, with the driver loaded at run time like the addon:
//   g++ -O2 -std=c++17 -pthread -o copy-batch-probe bench/copy-batch-probe.cc -ldl && ./copy-batch-probe
#include <dlfcn.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
typedef int CUresult; typedef unsigned long long CUdeviceptr; typedef void* CUcontext; typedef void* CUstream;
struct Loc { int type; int id; };
struct Attr { int srcAccessOrder; Loc src; Loc dst; unsigned flags; };
#define F(name, ...) static CUresult (*name)(__VA_ARGS__)
F(cuInit, unsigned); F(cuDeviceGet, int*, int); F(cuDevicePrimaryCtxRetain, CUcontext*, int); F(cuCtxSetCurrent, CUcontext);
F(cuMemAlloc, CUdeviceptr*, size_t); F(cuMemHostAlloc, void**, size_t, unsigned); F(cuStreamCreate, CUstream*, unsigned);
F(cuStreamSynchronize, CUstream); F(cuMemcpyHtoDAsync, CUdeviceptr, const void*, size_t, CUstream);
F(cuMemcpyBatchAsync_v2, CUdeviceptr*, CUdeviceptr*, size_t*, size_t, Attr*, size_t*, size_t, CUstream);
F(cuMemcpyDtoH, void*, CUdeviceptr, size_t);
F(cuMemcpyBatchAsync, CUdeviceptr*, CUdeviceptr*, size_t*, size_t, Attr*, size_t*, size_t, size_t*, CUstream);
template <class T> void R(void* h, T& f, const char* n) { f = (T)dlsym(h, n); printf("%s %s\n", n, f ? "found" : "MISSING"); }
int main(int argc, char** argv) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  R(h, cuInit, "cuInit"); R(h, cuDeviceGet, "cuDeviceGet"); R(h, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  R(h, cuCtxSetCurrent, "cuCtxSetCurrent"); R(h, cuMemAlloc, "cuMemAlloc_v2"); R(h, cuMemHostAlloc, "cuMemHostAlloc");
  R(h, cuStreamCreate, "cuStreamCreate"); R(h, cuStreamSynchronize, "cuStreamSynchronize"); R(h, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  R(h, cuMemcpyBatchAsync_v2, "cuMemcpyBatchAsync_v2"); R(h, cuMemcpyBatchAsync, "cuMemcpyBatchAsync"); R(h, cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  cuInit(0); int dev; cuDeviceGet(&dev, 0); CUcontext ctx; cuDevicePrimaryCtxRetain(&ctx, dev); cuCtxSetCurrent(ctx);
  const size_t piece = 4096;
  {  // correctness of the batch call: 64 pieces of distinct bytes to scattered places
    int per = 64; char* host; cuMemHostAlloc((void**)&host, per * piece, 1);
    for (size_t i = 0; i < per * piece; ++i) host[i] = (char)(i * 131 + i / piece);
    CUdeviceptr d; cuMemAlloc(&d, 2 * per * piece); CUstream s; cuStreamCreate(&s, 1);
    std::vector<CUdeviceptr> dst(per), src(per); std::vector<size_t> sz(per, piece);
    for (int i = 0; i < per; ++i) { dst[i] = d + ((i * 37) % per) * 2 * piece; src[i] = (CUdeviceptr)(host + i * piece); }
    Attr a{}; a.srcAccessOrder = 1; a.src = {2, 0}; a.dst = {1, 0}; size_t idx = 0;
    printf("batch_v2 rc %d\n", cuMemcpyBatchAsync_v2(dst.data(), src.data(), sz.data(), per, &a, &idx, 1, s));
    cuStreamSynchronize(s);
    std::vector<char> back(piece); int bad = 0;
    for (int i = 0; i < per; ++i) { cuMemcpyDtoH(back.data(), dst[i], piece); bad += memcmp(back.data(), host + i * piece, piece) != 0; }
    printf("batch_v2 correctness: %d of %d pieces wrong\n", bad, per);
    a.srcAccessOrder = 0; printf("batch_v2 with srcAccessOrder INVALID rc %d\n", cuMemcpyBatchAsync_v2(dst.data(), src.data(), sz.data(), per, &a, &idx, 1, s));
    a.srcAccessOrder = 1; a.src = {0, 0}; a.dst = {0, 0}; printf("batch_v2 with no location hints rc %d\n", cuMemcpyBatchAsync_v2(dst.data(), src.data(), sz.data(), per, &a, &idx, 1, s));
    cuStreamSynchronize(s);
    printf("batch_v2 count 0 rc %d\n", cuMemcpyBatchAsync_v2(dst.data(), src.data(), sz.data(), 0, &a, &idx, 1, s));
  }
  for (int threads : {1, 4, 16}) for (int per : {2, 3, 4, 8, 16, 32}) for (int mode = 0; mode < 2; ++mode) {
    if (mode == 2 && !cuMemcpyBatchAsync) continue;
    const int fills = 20000 / per + 4;
    std::atomic<long> total{0};
    std::vector<std::thread> ts;
    std::atomic<int> ready{0}; std::atomic<bool> go{false};
    std::vector<double> secs(threads);
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] {
      cuCtxSetCurrent(ctx);
      void* host; cuMemHostAlloc(&host, per * piece, 1); memset(host, t, per * piece);
      CUdeviceptr d; cuMemAlloc(&d, 2 * per * piece);
      CUstream s; cuStreamCreate(&s, 1);
      std::vector<CUdeviceptr> dst(per), src(per); std::vector<size_t> sz(per, piece);
      for (int i = 0; i < per; ++i) { dst[i] = d + ((i * 7919) % per) * 2 * piece; src[i] = (CUdeviceptr)host + i * piece; }
      Attr a{}; a.srcAccessOrder = 1; a.src = {2, 0}; a.dst = {1, 0}; size_t idx = 0, fail = 0;
      ready++; while (!go) {}
      auto t0 = std::chrono::steady_clock::now();
      for (int f = 0; f < fills; ++f) {
        CUresult r = 0;
        if (mode == 0) for (int i = 0; i < per; ++i) r |= cuMemcpyHtoDAsync(dst[i], (void*)src[i], piece, s);
        else if (mode == 1) r = cuMemcpyBatchAsync_v2(dst.data(), src.data(), sz.data(), per, &a, &idx, 1, s);
        else r = cuMemcpyBatchAsync(dst.data(), src.data(), sz.data(), per, &a, &idx, 1, &fail, s);
        if (r) { printf("error %d mode %d\n", r, mode); exit(1); }
        if (f % 2) cuStreamSynchronize(s);
      }
      cuStreamSynchronize(s);
      secs[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      total += (long)fills * per;
    });
    while (ready < threads) {}
    auto t0 = std::chrono::steady_clock::now(); go = true;
    for (auto& t : ts) t.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("threads %2d  copies/fill %5d  %-10s  %8.2f M copies/s\n", threads, per, mode == 0 ? "each" : mode == 1 ? "batch_v2" : "batch_v1", total / s / 1e6);
  }
  return 0;
}
