#!/usr/bin/env python3
"""Python safetensors on the same checkpoints, for penstock's GPU test and tensor benchmark.

  tensors_torch.py hashes FILE...                 load_file(device="cuda:0") per file; print
                                                  {"name": sha256 of the tensor's bytes in GPU memory}
  tensors_torch.py rows INDEX COUNT DEVICE FILE... load_file(device="cuda:DEVICE") per file; print the
                                                  hashes of tensor-parallel shard INDEX of COUNT: rows
                                                  [INDEX*R//COUNT, (INDEX+1)*R//COUNT) of every 2-D
                                                  tensor, other tensors whole
  tensors_torch.py bench METHOD REPEATS FILE...   METHOD load_file or safe_open; time REPEATS loads
                                                  (in this one process) and print one JSON object

Output is one JSON object on stdout. Hashes are taken from the GPU copy of each tensor (copied
back to the host byte for byte), so they say what landed in GPU memory.
"""
import hashlib
import json
import os
import sys
import time

import torch
from safetensors import safe_open
from safetensors.torch import load_file


def gpu_bytes_sha256(t: torch.Tensor) -> str:
    flat = t.contiguous().view(-1)
    raw = flat.view(torch.uint8) if flat.numel() else flat
    h = hashlib.sha256()
    # 64 MiB pieces: a large tensor is not held on the host in full.
    step = 64 << 20
    for off in range(0, raw.numel(), step):
        h.update(memoryview(raw[off:off + step].cpu().numpy()))
    return h.hexdigest()


def hashes(files):
    out = {}
    for f in files:
        tensors = load_file(f, device="cuda:0")
        torch.cuda.synchronize()
        for name, t in tensors.items():
            out[name] = {"sha256": gpu_bytes_sha256(t), "dtype": str(t.dtype), "shape": list(t.shape)}
        del tensors
        torch.cuda.empty_cache()
    print(json.dumps(out))


def rows(index, count, device, files):
    out = {}
    for f in files:
        tensors = load_file(f, device=f"cuda:{device}")
        torch.cuda.synchronize()
        for name, t in tensors.items():
            if t.dim() == 2:
                r = t.shape[0]
                t = t[index * r // count:(index + 1) * r // count]
            out[name] = {"sha256": gpu_bytes_sha256(t), "dtype": str(t.dtype), "shape": list(t.shape)}
        del tensors
        torch.cuda.empty_cache()
    print(json.dumps(out))


def peak_rss():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def rss():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def bench(method, repeats, files):
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    base_rss = rss()
    runs = []
    nbytes = sum(os.path.getsize(f) for f in files)
    for _ in range(repeats):
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        loaded = {}
        for f in files:
            if method == "load_file":
                loaded.update(load_file(f, device="cuda:0"))
            else:
                with safe_open(f, framework="pt", device="cuda:0") as st:
                    for k in st.keys():
                        loaded[k] = st.get_tensor(k)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        tensor_bytes = sum(t.numel() * t.element_size() for t in loaded.values())
        runs.append({"seconds": seconds, "tensorBytes": tensor_bytes, "tensors": len(loaded),
                     "gpuPeakAllocated": torch.cuda.max_memory_allocated()})
        del loaded
        torch.cuda.empty_cache()
    print(json.dumps({"method": method, "fileBytes": nbytes, "runs": runs, "baselineRss": base_rss,
                      "peakRss": peak_rss(), "torch": torch.__version__,
                      "safetensors": __import__("safetensors").__version__}))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "hashes":
        hashes(sys.argv[2:])
    elif len(sys.argv) >= 6 and sys.argv[1] == "rows":
        rows(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
    elif len(sys.argv) >= 5 and sys.argv[1] == "bench" and sys.argv[2] in ("load_file", "safe_open"):
        bench(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
