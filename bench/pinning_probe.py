# `python3 bench/pinning_probe.py` on a GPU machine: what a fresh process pays for CUDA (cuInit, the primary
# context) and for pinned staging, each way: cuMemHostAlloc (serial and from 16 threads) against
# anonymous memory faulted in (with and without transparent huge pages, MAP_POPULATE) and then
# registered with cuMemHostRegister. Times each alone with ctypes on libcuda; no penstock involved.
import ctypes, ctypes.util, mmap, os, threading, time, sys
cu = ctypes.CDLL('libcuda.so.1')
def ck(r, what):
    if r != 0: raise RuntimeError(f'{what}: {r}')
T = time.perf_counter
t0 = T(); ck(cu.cuInit(0), 'cuInit'); t1 = T()
dev = ctypes.c_int(); ck(cu.cuDeviceGet(ctypes.byref(dev), 0), 'get')
ctx = ctypes.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), 'retain'); t2 = T()
ck(cu.cuCtxSetCurrent(ctx), 'set'); t3 = T()
print(f'cuInit {1e3*(t1-t0):.1f} ms, primary ctx retain {1e3*(t2-t1):.1f} ms, set {1e3*(t3-t2):.2f}')
print('THP', open('/sys/kernel/mm/transparent_hugepage/enabled').read().strip(), open('/sys/kernel/mm/transparent_hugepage/defrag').read().strip())
cu.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
cu.cuMemFreeHost.argtypes = [ctypes.c_void_p]
cu.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
cu.cuMemHostUnregister.argtypes = [ctypes.c_void_p]
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MiB = 1 << 20
def hostalloc_serial(n, size):
    ps = []
    t = T()
    for _ in range(n):
        p = ctypes.c_void_p(); ck(cu.cuMemHostAlloc(ctypes.byref(p), size, 1), 'hostalloc'); ps.append(p)
    dt = T() - t
    for p in ps: cu.cuMemFreeHost(p)
    return dt
def hostalloc_parallel(n, size):
    ps = [None] * n
    def w(i):
        cu.cuCtxSetCurrent(ctx)
        p = ctypes.c_void_p(); ck(cu.cuMemHostAlloc(ctypes.byref(p), size, 1), 'hostalloc'); ps[i] = p
    th = [threading.Thread(target=w, args=(i,)) for i in range(n)]
    t = T()
    for x in th: x.start()
    for x in th: x.join()
    dt = T() - t
    for p in ps: cu.cuMemFreeHost(p)
    return dt
def register(total, piece, huge, populate):
    length = total + 2 * MiB
    flags = 0x22 | (0x8000 if populate else 0)  # MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE
    raw = libc.mmap(None, length, 3, flags, -1, 0)
    base = (raw + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)
    t = T()
    if huge: libc.madvise(base, total, 14)
    ctypes.memset(base, 0, total)
    tt = T()
    for off in range(0, total, piece):
        ck(cu.cuMemHostRegister_v2(base + off, piece, 1), 'register')
    tr = T()
    for off in range(0, total, piece): cu.cuMemHostUnregister(base + off)
    libc.munmap(raw, length)
    return tt - t, tr - tt
def register_parallel(n, piece, huge):
    total = n * piece
    length = total + 2 * MiB
    raw = libc.mmap(None, length, 3, 0x22, -1, 0)
    base = (raw + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)
    if huge: libc.madvise(base, total, 14)
    def w(i):
        cu.cuCtxSetCurrent(ctx)
        ctypes.memset(base + i * piece, 0, piece)
        ck(cu.cuMemHostRegister_v2(base + i * piece, piece, 1), 'register')
    th = [threading.Thread(target=w, args=(i,)) for i in range(n)]
    t = T()
    for x in th: x.start()
    for x in th: x.join()
    dt = T() - t
    for i in range(n): cu.cuMemHostUnregister(base + i * piece)
    libc.munmap(raw, length)
    return dt
for rep in range(2):
    for size in (4 * MiB, 8 * MiB, 16 * MiB):
        s = hostalloc_serial(16, size); p = hostalloc_parallel(16, size)
        print(f'[{rep}] cuMemHostAlloc 16 x {size//MiB} MiB: serial {1e3*s:.1f} ms ({16*size/s/2**30:.2f} GiB/s), 16 threads {1e3*p:.1f} ms ({16*size/p/2**30:.2f} GiB/s)')
    for huge in (False, True):
        for populate in (False, True):
            touch, reg = register(256 * MiB, 16 * MiB, huge, populate)
            print(f'[{rep}] mmap 256 MiB huge={huge} populate={populate}: touch {1e3*touch:.1f} ms, register 16x16MiB {1e3*reg:.1f} ms, total {256/1024/(touch+reg):.2f} GiB/s')
        d = register_parallel(16, 16 * MiB, huge)
        print(f'[{rep}] 16 threads touch+register 16 MiB huge={huge}: {1e3*d:.1f} ms ({0.25/d:.2f} GiB/s)')
    for gb in (7,):
        p = ctypes.c_uint64(); t = T(); ck(cu.cuMemAlloc_v2(ctypes.byref(p), gb << 30), 'alloc'); a = T() - t
        t = T(); cu.cuMemFree_v2(p); f = T() - t
        print(f'[{rep}] cuMemAlloc {gb} GiB {1e3*a:.2f} ms, free {1e3*f:.2f} ms')
