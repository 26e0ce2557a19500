#!/usr/bin/env python3
"""Python rows of `bench:tensors`, one fresh process each.

  tensors_peers.py load_file FILE [--reference REF.json]
        safetensors.torch.load_file(FILE, device="cuda:0"); the loader's clock starts after
        `import torch`, safetensors' import and torch's CUDA context, as the peers' own do.
  tensors_peers.py kit KITDIR -- ARGS...
        runs KITDIR/bench.py ARGS... (a peer's own bench script, unchanged) in this process,
        noting when its clock stops (its tensors are on the GPU) and when torch's context existed.
  tensors_peers.py cudart KITDIR
        prints a folder to put first on LD_LIBRARY_PATH so that `libcudart.so` (no suffix) loads,
        or nothing when it loads already (fastsafetensors dlopens that name).

When the tensors are ready, one line `PENSTOCK_BENCH_READY {json}` goes to file descriptor 3
(the parent's clock stops there): seconds since this process started (from /proc/self/stat,
10 ms steps) and the loader's own seconds. Results go to stdout as JSON (load_file) or to the
kit's --json-out file.
"""
import json
import os
import runpy
import sys
import time

READY_TAG = "PENSTOCK_BENCH_READY"


def since_start():
    """Seconds since this process started (its start time is counted in clock ticks since boot)."""
    with open("/proc/self/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started


def ready(report):
    try:
        os.write(3, (READY_TAG + " " + json.dumps(report) + "\n").encode())
    except OSError:
        pass  # run by hand, without the parent's descriptor 3


def gpu_hashes(tensors, threads=16):
    """{name: sha256 of the tensor's bytes as they are in GPU memory} (copied back per tensor)."""
    import concurrent.futures as cf
    import hashlib

    import torch

    def one(item):
        name, t = item
        raw = t.detach().contiguous().reshape(-1).view(torch.uint8)
        return name, hashlib.sha256(memoryview(raw.cpu().numpy())).hexdigest()

    items = sorted(tensors.items(), key=lambda kv: -kv[1].numel() * kv[1].element_size())
    with cf.ThreadPoolExecutor(threads) as ex:
        return dict(ex.map(one, items))


def load_file_main(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="tensors_peers.py load_file")
    ap.add_argument("file")
    ap.add_argument("--reference")
    a = ap.parse_args(argv)
    marks = {"entered": since_start()}
    out = {"loader": "safetensors.load_file", "file": a.file, "ok": False}
    try:
        import torch
        import safetensors
        from safetensors.torch import load_file

        marks["imported"] = since_start()
        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda:0")
        torch.cuda.synchronize()
        marks["context"] = since_start()
        t0 = time.perf_counter()
        tensors = load_file(a.file, device="cuda:0")
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        marks["ready"] = since_start()
        ready({"sinceStartS": marks["ready"], "loaderS": t1 - t0, "contextAtS": marks["context"], "importedAtS": marks["imported"]})
        out.update(seconds=t1 - t0, tensors=len(tensors), bytes=sum(t.numel() * t.element_size() for t in tensors.values()),
                   versions={"torch": torch.__version__, "safetensors": safetensors.__version__})
        if a.reference:
            th = time.perf_counter()
            with open(a.reference) as f:
                ref = json.load(f)["tensors"]
            got = gpu_hashes(tensors)
            bad = [k for k, v in got.items() if ref.get(k) != v]
            missing = [k for k in ref if k not in got]
            out["check"] = {"compared": len(got), "mismatched": len(bad), "missing": len(missing),
                            "firstBad": (bad + missing)[:5], "how": "sha256 of every tensor from GPU memory = the file's",
                            "seconds": time.perf_counter() - th}
        out["ok"] = True
    except Exception as e:  # the parent reports it in the row
        out["error"] = f"{type(e).__name__}: {e}"
    out["marksS"] = marks
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


def kit_main(argv):
    if len(argv) < 2 or argv[1] != "--":
        sys.stderr.write("usage: tensors_peers.py kit KITDIR -- ARGS...\n")
        return 2
    kitdir = os.path.abspath(argv[0])
    args = argv[2:]
    marks = {"entered": since_start()}
    sys.path.insert(0, kitdir)
    import peers_common as pc  # the kit's own helpers; its bench.py imports this same module

    prepare, set_time = pc.prepare, pc.set_time

    def timed_prepare(a):
        r = prepare(a)  # cache state, import torch, torch's CUDA context: before the kit's clock
        marks["context"] = since_start()
        return r

    def timed_set_time(res, seconds):
        # Called right after the kit's clock stopped (tensors on the GPU, synchronized).
        ready({"sinceStartS": since_start(), "loaderS": seconds, "contextAtS": marks.get("context")})
        return set_time(res, seconds)

    pc.prepare = timed_prepare
    pc.set_time = timed_set_time
    bench = os.path.join(kitdir, "bench.py")
    execve = os.execve
    me = os.path.abspath(__file__)

    def wrapped_execve(path, args_, env):
        # A kit that re-executes itself stays under this wrapper.
        args_ = list(args_)
        if len(args_) >= 2 and os.path.abspath(args_[1]) == bench:
            args_ = [args_[0], me, "kit", kitdir, "--"] + args_[2:]
        return execve(path, args_, env)

    os.execve = wrapped_execve
    sys.argv = [bench] + args
    runpy.run_path(bench, run_name="__main__")
    return 0


def cudart_main(argv):
    import glob
    import subprocess

    kitdir = os.path.abspath(argv[0])
    probe = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libcudart.so')"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if probe.returncode == 0:
        print("")
        return 0
    import torch  # noqa: F401  (a CUDA build of torch loads its own CUDA runtime)

    cands = sorted({l.split()[-1] for l in open("/proc/self/maps") if "/libcudart.so" in l})
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    cands += sorted(glob.glob(f"{home}/lib64/libcudart.so.*")) + sorted(glob.glob(f"{home}/targets/*/lib/libcudart.so.*"))
    if not cands:
        sys.stderr.write("no libcudart.so.N found (torch's or CUDA_HOME's)\n")
        return 1
    d = os.path.join(kitdir, ".cudart")
    os.makedirs(d, exist_ok=True)
    link = os.path.join(d, "libcudart.so")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(cands[0], link)
    print(d)
    return 0


if __name__ == "__main__":
    cmds = {"load_file": load_file_main, "kit": kit_main, "cudart": cudart_main}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(cmds[sys.argv[1]](sys.argv[2:]))
