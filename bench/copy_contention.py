"""Pinned -> GPU copy rate alone and while processes read a warm file from the page cache.

Staged reads into a GPU copy out of host memory while the CPUs read the next bytes; this
measures how much that reading slows the copies. Each reader process preads 1 MiB at a time
from a warm file into its own buffer of --reader-mib (1: it stays in the CPU's cache; 64: every
pread also writes to memory); the copies are torch copies of pinned memory into the GPU on one
stream, timed with CUDA events.

    python3 bench/copy_contention.py FILE [--readers 0,4,8,16] [--sizes-mib 16,64] [--reader-mib 1,64]
"""
import argparse
import multiprocessing as mp
import os
import time

import torch

CHUNK = 1 << 20


def reader(path, stop, counter, buffer_bytes):
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    buf = memoryview(bytearray(buffer_bytes))
    off = (os.getpid() * 7919 * CHUNK) % (size - CHUNK)
    at = 0
    done = 0
    while not stop.is_set():
        done += os.preadv(fd, [buf[at:at + CHUNK]], off)
        off = (off + CHUNK) % (size - CHUNK)
        at = (at + CHUNK) % buffer_bytes
        if done >= 256 * CHUNK:
            with counter.get_lock():
                counter.value += done
            done = 0
    os.close(fd)


def copy_rate(src, dst, reps):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        dst.copy_(src, non_blocking=True)
    end.record()
    end.synchronize()
    return src.numel() * reps / (start.elapsed_time(end) / 1e3) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--readers", default="0,4,8,16")
    ap.add_argument("--sizes-mib", default="16,64")
    ap.add_argument("--reader-mib", default="1")
    a = ap.parse_args()
    sizes = [int(s) << 20 for s in a.sizes_mib.split(",")]
    srcs = {s: torch.empty(s, dtype=torch.uint8).pin_memory().fill_(7) for s in sizes}
    dsts = {s: torch.empty(s, dtype=torch.uint8, device="cuda") for s in sizes}
    for s in sizes:
        copy_rate(srcs[s], dsts[s], 5)
    runs = [(int(r), int(b) << 20) for b in a.reader_mib.split(",") for r in a.readers.split(",")]
    for n, buffer_bytes in runs:
        stop = mp.Event()
        counter = mp.Value("q", 0)
        procs = [mp.Process(target=reader, args=(a.file, stop, counter, buffer_bytes)) for _ in range(n)]
        for p in procs:
            p.start()
        time.sleep(0.5 if n else 0)
        before, t0 = counter.value, time.perf_counter()
        rates = {s: copy_rate(srcs[s], dsts[s], max(20, (2 << 30) // s)) for s in sizes}
        read_rate = (counter.value - before) / (time.perf_counter() - t0) / 1e9
        stop.set()
        for p in procs:
            p.join()
        cols = "  ".join(f"{s >> 20} MiB copies {r:6.2f} GB/s" for s, r in rates.items())
        print(f"readers {n:2d} into {buffer_bytes >> 20:3d} MiB: {cols}  (readers {read_rate:6.2f} GB/s meanwhile)", flush=True)


if __name__ == "__main__":
    main()
