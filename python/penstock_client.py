"""Python client of ``penstock serve``: tensors resident in GPU memory, mapped into this process.

A ``penstock serve`` daemon keeps checkpoints loaded in GPU memory. This module asks it for a
tensor set over its Unix socket, maps the set's memory here through CUDA IPC (the driver API
through ctypes, in the GPU's primary context, the one PyTorch uses) and hands out every tensor as
a zero-copy view: objects with ``__cuda_array_interface__`` (CuPy, Numba, PyTorch can take them)
or, when PyTorch is installed, ``torch.Tensor`` views.

    import penstock_client
    sd = penstock_client.state_dict("/run/user/1000/penstock/serve.sock",
                                    {"path": "/models/llama/model.safetensors.index.json"})
    model.load_state_dict(sd, assign=True)

Lifetime: the daemon keeps the set while this process holds a lease on it; the lease ends with
``close()``, or when the connection closes (this process exiting, crashing included). The mapping
lives while any tensor built from it lives (each view keeps it referenced); ``close()`` unmaps at
once, after which tensors built from it must not be used. Only the standard library and the CUDA
driver (``libcuda.so.1``; ``PENSTOCK_CUDA_LIBRARY`` names another) are needed; torch is optional.
"""

import base64
import ctypes
import json
import os
import socket as _socket
import threading

__all__ = ["connect", "state_dict", "default_socket_path", "Client", "ServedSet", "StateDict", "CudaBytes", "PenstockServeError"]

PROTOCOL_VERSION = 1
MANIFEST_TYPE = "penstock.tensor-manifest"
HANDLE_TYPE = "penstock.cuda-ipc"
_LAZY_ENABLE_PEER_ACCESS = 1
_MAX_ANSWER_BYTES = 256 << 20

# safetensors dtype name -> torch dtype attribute; other dtypes (sub-byte ones) stay raw bytes.
_TORCH_DTYPES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16",
    "F16": "float16", "BF16": "bfloat16", "U32": "uint32", "I32": "int32", "F32": "float32",
    "U64": "uint64", "I64": "int64", "F64": "float64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
}


class PenstockServeError(Exception):
    """An error from the daemon or from mapping its memory; ``code`` says which (as in Node)."""

    def __init__(self, code, message):
        super().__init__(f"[{code}] {message}")
        self.code = code


def default_socket_path():
    """The socket ``penstock serve`` uses when given none."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "penstock", "serve.sock")
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"penstock-{os.getuid()}", "serve.sock")


# --- the CUDA driver ---------------------------------------------------------------------

class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


_driver = None
_driver_lock = threading.Lock()


def _cuda():
    """The driver, loaded and initialised once."""
    global _driver
    with _driver_lock:
        if _driver is None:
            path = os.environ.get("PENSTOCK_CUDA_LIBRARY") or "libcuda.so.1"
            try:
                lib = ctypes.CDLL(path)
            except OSError as err:
                raise PenstockServeError("ERR_PENSTOCK_NO_CUDA", f"the CUDA driver ({path}) cannot be loaded: {err}") from None
            lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _IpcHandle, ctypes.c_uint]
            lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
            lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
            _check(lib, lib.cuInit(0), "cuInit")
            _driver = lib
        return _driver


def _check(lib, result, call):
    if result != 0:
        name = ctypes.c_char_p()
        try:
            lib.cuGetErrorName(result, ctypes.byref(name))
        except AttributeError:
            pass
        code = name.value.decode() if name.value else f"CUDA_ERROR_{result}"
        raise PenstockServeError(code, f"{call} failed with {code} ({result})")


class _Context:
    """The primary context of one GPU made current for a few calls (the context PyTorch uses)."""

    def __init__(self, lib, device):
        self.lib, self.device, self.ctx = lib, device, ctypes.c_void_p()

    def __enter__(self):
        _check(self.lib, self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), self.device), "cuDevicePrimaryCtxRetain")
        r = self.lib.cuCtxPushCurrent_v2(self.ctx)
        if r != 0:
            self.lib.cuDevicePrimaryCtxRelease_v2(self.device)
            _check(self.lib, r, "cuCtxPushCurrent")
        return self

    def __exit__(self, *exc):
        self.lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        self.lib.cuDevicePrimaryCtxRelease_v2(self.device)


class _Mapping:
    """One CUDA IPC mapping of a set's slab, with the lease that keeps the daemon's memory there.

    Every view refers to it, so it stays mapped while any view (or a tensor built from one) lives;
    ``close()`` unmaps now and ends the lease.
    """

    def __init__(self, client, lease, slab):
        lib = _cuda()
        raw = base64.b64decode(slab["handle"])
        if len(raw) != 64:
            raise PenstockServeError("ERR_PENSTOCK_IPC_BAD_HANDLE", "the slab handle is not 64 bytes")
        dev = ctypes.c_int(-1)
        r = lib.cuDeviceGetByPCIBusId(ctypes.byref(dev), slab["pciBusId"].encode())
        if r != 0:
            raise PenstockServeError("ERR_PENSTOCK_IPC_DEVICE_NOT_VISIBLE", f"no GPU of this process has PCI bus id {slab['pciBusId']} (CUDA_VISIBLE_DEVICES may hide it)")
        self.device = dev.value
        self.client, self.lease = client, lease
        self.lib = lib
        self.base = ctypes.c_uint64(0)
        handle = _IpcHandle()
        ctypes.memmove(ctypes.addressof(handle), raw, 64)  # byte for byte: the handle holds NULs
        with _Context(lib, self.device):
            _check(lib, lib.cuIpcOpenMemHandle_v2(ctypes.byref(self.base), handle, _LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle")
        # Offsets in the manifest are relative to the exported view, which starts `offset` into the allocation.
        self.start = self.base.value + slab["offset"]
        self.size = slab["size"]
        self.closed = False
        self._lock = threading.Lock()

    def close(self, collected=False):
        with self._lock:
            if self.closed:
                return
            self.closed = True
            with _Context(self.lib, self.device):
                self.lib.cuIpcCloseMemHandle(self.base.value)
        self.client._release(self.lease, wait=not collected)

    def __del__(self):
        try:
            self.close(collected=True)
        except Exception:
            pass


class CudaBytes:
    """``nbytes`` bytes of GPU memory at ``ptr`` on GPU ``device``, as a 1-D ``uint8`` array.

    Exposes ``__cuda_array_interface__`` (version 3), so CuPy, Numba and PyTorch take it without a
    copy; holds the mapping it lies in.
    """

    def __init__(self, mapping, offset, nbytes):
        self._mapping = mapping
        self.device = mapping.device
        self.ptr = mapping.start + offset
        self.nbytes = nbytes

    @property
    def __cuda_array_interface__(self):
        if self._mapping.closed:
            raise PenstockServeError("ERR_PENSTOCK_FREED", "this set was closed; its memory is unmapped")
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False), "strides": None, "version": 3, "stream": None}

    def read_bytes(self):
        """A copy of the bytes in host memory (cuMemcpyDtoH), e.g. to check them."""
        if self._mapping.closed:
            raise PenstockServeError("ERR_PENSTOCK_FREED", "this set was closed; its memory is unmapped")
        out = ctypes.create_string_buffer(self.nbytes)
        if self.nbytes:
            with _Context(self._mapping.lib, self.device):
                _check(self._mapping.lib, self._mapping.lib.cuMemcpyDtoH_v2(out, self.ptr, self.nbytes), "cuMemcpyDtoH")
        return out.raw


class ServedSet:
    """A tensor set held for this process by a lease: ``tensors`` (name -> record with ``data``, a
    :class:`CudaBytes`), ``metadata``, and :meth:`torch` for ``torch.Tensor`` views."""

    def __init__(self, client, answer):
        manifest = answer["manifest"]
        if not isinstance(manifest, dict) or manifest.get("type") != MANIFEST_TYPE or manifest.get("version") != 1:
            raise PenstockServeError("ERR_PENSTOCK_IPC_BAD_MANIFEST", "the daemon's answer holds no version 1 tensor manifest")
        slab = manifest["slab"]
        if not isinstance(slab, dict) or slab.get("type") != HANDLE_TYPE or slab.get("version") != 1:
            raise PenstockServeError("ERR_PENSTOCK_IPC_BAD_HANDLE", "the manifest's slab is not a version 1 penstock IPC handle")
        self.lease, self.key, self.hit = answer["lease"], answer["key"], answer["hit"]
        self.manifest = manifest
        self.metadata = dict(manifest.get("metadata") or {})
        self._mapping = _Mapping(client, self.lease, slab)
        self.device = self._mapping.device
        self.tensors = {}
        for t in manifest["tensors"]:
            if t["byteOffset"] + t["byteLength"] > slab["size"]:
                raise PenstockServeError("ERR_PENSTOCK_IPC_BAD_MANIFEST", f"tensor {t['name']} lies outside the slab")
            self.tensors[t["name"]] = dict(t, data=CudaBytes(self._mapping, t["byteOffset"], t["byteLength"]))

    def torch(self):
        """``dict[str, torch.Tensor]``: each tensor a view of the mapping, with its dtype, shape and
        strides (dtypes torch lacks stay ``uint8`` bytes). Needs torch."""
        import torch

        device = torch.device("cuda", self.device)
        out = {}
        for name, t in self.tensors.items():
            attr = _TORCH_DTYPES.get(t["dtype"])
            dtype = getattr(torch, attr, None) if attr else None
            if t["byteLength"] == 0:
                out[name] = torch.empty(t["shape"], dtype=dtype or torch.uint8, device=device)
                continue
            raw = torch.as_tensor(t["data"], device=device)
            out[name] = raw if dtype is None else raw.view(dtype).as_strided(t["shape"], t["strides"])
        return out

    @property
    def closed(self):
        return self._mapping.closed

    def close(self):
        """Unmaps the set here and ends the lease. Tensors built from it must not be used after."""
        self._mapping.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class StateDict(dict):
    """``dict[str, torch.Tensor]`` of views of a served set; ``close()`` unmaps and ends the lease."""

    def __init__(self, served):
        super().__init__(served.torch())
        self.served = served

    def close(self):
        self.served.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Client:
    """A connection to a daemon. Requests are answered in order; closing it ends its leases."""

    def __init__(self, path=None, timeout=None):
        self.path = path or default_socket_path()
        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(self.path)
        except OSError:
            self._sock.close()
            raise
        self._reader = self._sock.makefile("rb")
        self._lock = threading.Lock()
        self._next_id = 1
        self._deferred = []
        self.closed = False

    def request(self, op, **fields):
        """Sends one request and returns the answer (a dict); raises PenstockServeError for an error answer."""
        with self._lock:
            return self._request_locked(op, fields)

    def _request_locked(self, op, fields):
        # Leases whose mappings were collected while a request was under way are released first.
        while self._deferred and not self.closed:
            lease = self._deferred.pop()
            try:
                self._exchange("release", {"lease": lease})
            except PenstockServeError as err:
                if err.code == "ERR_PENSTOCK_SERVE_CLOSED":
                    raise
        return self._exchange(op, fields)

    def _exchange(self, op, fields):
        if self.closed:
            raise PenstockServeError("ERR_PENSTOCK_SERVE_CLOSED", "the connection to the daemon is closed")
        rid = self._next_id
        self._next_id += 1
        line = json.dumps(dict(fields, v=PROTOCOL_VERSION, id=rid, op=op)).encode() + b"\n"
        try:
            self._sock.sendall(line)
        except OSError as err:
            raise PenstockServeError("ERR_PENSTOCK_SERVE_CLOSED", f"the daemon's connection failed: {err}") from None
        while True:
            raw = self._reader.readline(_MAX_ANSWER_BYTES + 1)
            if not raw:
                raise PenstockServeError("ERR_PENSTOCK_SERVE_CLOSED", "the connection to the daemon closed before it answered")
            if not raw.endswith(b"\n"):
                raise PenstockServeError("ERR_PENSTOCK_SERVE_BAD_REQUEST", "the daemon's answer is too long or cut off")
            answer = json.loads(raw)
            if answer.get("v") != PROTOCOL_VERSION:
                raise PenstockServeError("ERR_PENSTOCK_SERVE_VERSION", f"the daemon speaks protocol version {answer.get('v')}, this client {PROTOCOL_VERSION}")
            if answer.get("id") in (rid, None):
                break
        if not answer.get("ok"):
            err = answer.get("error") or {}
            raise PenstockServeError(err.get("code", "ERR_PENSTOCK_INTERNAL"), err.get("message", "the daemon gave an error"))
        return answer

    def acquire(self, spec):
        """A :class:`ServedSet` for ``spec`` (``{"path": ..., "device"?, "filter"?, "rows"?}``), loaded
        by the daemon first if it does not hold it. Relative paths are made absolute here."""
        if isinstance(spec, (str, os.PathLike)):
            spec = {"path": spec}
        spec = dict(spec)
        paths = spec.get("path")
        fix = lambda p: os.path.abspath(os.fspath(p)) if isinstance(p, (str, os.PathLike)) and "://" not in os.fspath(p) else p
        spec["path"] = [fix(p) for p in paths] if isinstance(paths, (list, tuple)) else fix(paths)
        answer = self.request("acquire", set=spec)
        try:
            return ServedSet(self, answer)
        except BaseException:
            self._release(answer["lease"])
            raise

    def _release(self, lease, wait=True):
        if self.closed:
            return
        if not wait:
            # From the garbage collector, maybe inside a request of this thread: never block or
            # interleave; release it now if the connection is free, else with the next request.
            if not self._lock.acquire(blocking=False):
                self._deferred.append(lease)
                return
            try:
                self._exchange("release", {"lease": lease})
            except PenstockServeError:
                pass
            finally:
                self._lock.release()
            return
        try:
            self.request("release", lease=lease)
        except PenstockServeError as err:
            if err.code != "ERR_PENSTOCK_SERVE_CLOSED":
                raise

    def list(self):
        """The daemon's sets, most recently used first."""
        return self.request("list")["sets"]

    def stats(self):
        """The daemon's totals, counters and per-GPU memory."""
        return self.request("stats")

    def health(self):
        """The daemon's pid, version and protocol."""
        return self.request("health")

    def close(self):
        """Closes the connection: the daemon ends every lease it held."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._reader.close()
            self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(path=None, timeout=None):
    """A :class:`Client` connected to the daemon at ``path`` (default :func:`default_socket_path`)."""
    return Client(path, timeout)


def state_dict(socket=None, spec=None, **spec_fields):
    """``dict[str, torch.Tensor]`` of zero-copy views of a set the daemon at ``socket`` serves,
    ready for ``model.load_state_dict(sd, assign=True)``. ``spec`` is a path or a set spec dict.
    The returned :class:`StateDict` holds its own connection; ``close()`` unmaps and ends the lease
    (otherwise they end when the last tensor is gone and the connection is collected, or at exit)."""
    if spec is None:
        spec = spec_fields
    elif isinstance(spec, (str, os.PathLike)):
        spec = dict(spec_fields, path=spec)
    client = connect(socket)
    try:
        served = client.acquire(spec)
    except BaseException:
        client.close()
        raise
    try:
        return StateDict(served)
    except BaseException:
        served.close()
        client.close()
        raise
