#!/usr/bin/env python3
"""Open a penstock tensor manifest in PyTorch without copying, and check it.

A Node process loads a checkpoint into GPU memory with penstock and writes a tensor manifest
(``exportTensorSet``, or ``buildTensorManifest`` for a slab of its own): the slab's CUDA IPC
handle plus every tensor's dtype, shape, strides and byte offset. This script maps the slab in this process, builds every tensor as a view of
it, and (with ``--safetensors``) compares each one bitwise with ``safetensors.torch.load_file``.
It prints one JSON line: tensors, bytes, seconds to open all tensors, and GPU memory growth
(``torch.cuda.memory_allocated`` and ``torch.cuda.mem_get_info``) over the opening.

    python3 test/gpu/ipc_torch.py manifest.json --safetensors model.safetensors [--mode torch|cupy]

``--mode torch`` opens the handle with ``torch.UntypedStorage._new_shared_cuda`` (private API,
which takes the raw 64-byte handle); ``--mode cupy`` with ``cupy.cuda.runtime.ipcOpenMemHandle``
and hands the memory to torch through DLPack. Exit status: 0 all equal, 1 a mismatch, 2 bad input.
"""

import argparse
import base64
import ctypes
import json
import sys
import time

MANIFEST_TYPE = "penstock.tensor-manifest"
HANDLE_TYPE = "penstock.cuda-ipc"

# safetensors dtype name -> torch dtype attribute; sub-byte dtypes stay raw bytes.
TORCH_DTYPES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16",
    "F16": "float16", "BF16": "bfloat16", "U32": "uint32", "I32": "int32", "F32": "float32",
    "U64": "uint64", "I64": "int64", "F64": "float64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
}


def fail(message):
    print(json.dumps({"ok": False, "error": message}))
    sys.exit(2)


def read_manifest(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError) as err:
        fail(f"cannot read the manifest {path}: {err}")
    if not isinstance(m, dict) or m.get("type") != MANIFEST_TYPE or m.get("version") != 1:
        fail(f"{path} is not a version 1 penstock tensor manifest")
    slab = m.get("slab")
    if not isinstance(slab, dict) or slab.get("type") != HANDLE_TYPE or slab.get("version") != 1:
        fail("the manifest's slab is not a version 1 penstock IPC handle")
    raw = base64.b64decode(slab["handle"])
    if len(raw) != 64:
        fail("the slab handle is not 64 bytes")
    return m, slab, raw


def ordinal_for_bus(pci_bus_id):
    """This process's ordinal of the GPU at a PCI bus id (ordinals differ between processes)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        fail(f"the CUDA driver cannot be loaded: {err}")
    if cuda.cuInit(0) != 0:
        fail("cuInit failed")
    dev = ctypes.c_int(-1)
    r = cuda.cuDeviceGetByPCIBusId(ctypes.byref(dev), pci_bus_id.encode())
    if r != 0:
        fail(f"no GPU of this process has PCI bus id {pci_bus_id} (CUresult {r})")
    return dev.value


def torch_dtype(torch, name):
    attr = TORCH_DTYPES.get(name)
    return getattr(torch, attr, None) if attr else None


def open_with_torch(torch, slab, raw, tensors, device):
    """One UntypedStorage per tensor; torch opens the handle once and shares the mapping."""
    no_ref_counter = b"penstock-no-ref-counter"  # torch's release of it is best effort
    out = {}
    for t in tensors:
        storage = torch.UntypedStorage._new_shared_cuda(
            device, raw, t["byteLength"], slab["offset"] + t["byteOffset"], no_ref_counter, 0, b"", False)
        out[t["name"]] = build(torch, storage_bytes(torch, storage, t, device), t)
    return out, None


def storage_bytes(torch, storage, t, device):
    return torch.empty(0, dtype=torch.uint8, device=f"cuda:{device}").set_(storage, 0, (t["byteLength"],), (1,))


def open_with_cupy(torch, slab, raw, tensors, device):
    import cupy
    with cupy.cuda.Device(device):
        ptr = cupy.cuda.runtime.ipcOpenMemHandle(raw)
        mem = cupy.cuda.UnownedMemory(ptr, slab["allocationSize"], None, device)
        out = {}
        for t in tensors:
            mp = cupy.cuda.MemoryPointer(mem, slab["offset"] + t["byteOffset"])
            arr = cupy.ndarray((t["byteLength"],), dtype=cupy.uint8, memptr=mp)
            out[t["name"]] = build(torch, torch.from_dlpack(arr), t)
    return out, lambda: cupy.cuda.runtime.ipcCloseMemHandle(ptr)


def build(torch, raw_bytes, t):
    """The typed tensor over `raw_bytes` (1-D uint8 on the GPU), or the bytes for sub-byte dtypes."""
    dt = torch_dtype(torch, t["dtype"])
    if dt is None:
        return raw_bytes
    typed = raw_bytes.view(dt) if t["byteLength"] else torch.empty(0, dtype=dt, device=raw_bytes.device)
    return typed.as_strided(t["shape"], t["strides"])


def as_bytes(torch, x):
    x = x.contiguous().reshape(-1)
    return x if x.dtype == torch.uint8 else x.view(torch.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("manifest")
    ap.add_argument("--safetensors", nargs="*", default=[], help="files to compare with (all tensors of the manifest)")
    ap.add_argument("--mode", choices=["torch", "cupy"], default="torch")
    args = ap.parse_args()

    m, slab, raw = read_manifest(args.manifest)
    device = ordinal_for_bus(slab["pciBusId"])
    import torch
    torch.cuda.set_device(device)
    torch.zeros(1, device=f"cuda:{device}")  # the context exists before the baseline
    torch.cuda.synchronize(device)
    allocated0 = torch.cuda.memory_allocated(device)
    free0, total = torch.cuda.mem_get_info(device)

    t0 = time.perf_counter()
    opener = open_with_torch if args.mode == "torch" else open_with_cupy
    tensors, close = opener(torch, slab, raw, m["tensors"], device)
    torch.cuda.synchronize(device)
    open_seconds = time.perf_counter() - t0

    allocated1 = torch.cuda.memory_allocated(device)
    free1, _ = torch.cuda.mem_get_info(device)
    result = {
        "ok": True,
        "mode": args.mode,
        "device": device,
        "tensors": len(tensors),
        "bytes": sum(t["byteLength"] for t in m["tensors"]),
        "openSeconds": open_seconds,
        "allocatedGrowth": allocated1 - allocated0,
        "deviceFreeDrop": free0 - free1,
        "totalMemory": total,
    }

    if args.safetensors:
        from safetensors.torch import load_file
        expected = {}
        t1 = time.perf_counter()
        for path in args.safetensors:
            expected.update(load_file(path, device=f"cuda:{device}"))
        torch.cuda.synchronize(device)
        result["loadFileSeconds"] = time.perf_counter() - t1
        mismatches = []
        for t in m["tensors"]:
            got, want = tensors[t["name"]], expected.pop(t["name"], None)
            if want is None:
                mismatches.append({"name": t["name"], "why": "not in the safetensors files"})
            elif got.dtype != torch.uint8 and (got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape)):
                mismatches.append({"name": t["name"], "why": f"{got.dtype}{tuple(got.shape)} vs {want.dtype}{tuple(want.shape)}"})
            elif not torch.equal(as_bytes(torch, got), as_bytes(torch, want)):
                mismatches.append({"name": t["name"], "why": "bytes differ"})
        mismatches += [{"name": n, "why": "not in the manifest"} for n in expected]
        result["compared"] = len(m["tensors"])
        result["mismatches"] = mismatches[:20]
        result["mismatchCount"] = len(mismatches)
        result["ok"] = not mismatches

    del tensors
    torch.cuda.synchronize(device)
    if close:
        close()
    print(json.dumps(result))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
