# SPDX-License-Identifier: Apache-2.0
"""A stand-in for the few PyTorch calls tests/gpu/torch_graph.py makes, for dry runs of
tests/gpu/torch_graph.sh where there is no PyTorch (PYTHONPATH=tests/gpu/dryrun): each matmul is
a spin kernel of 150 us and each in-place op one of 20 us, launched through the driver API of the
libcuda.so.1 the loader finds (the sim's, with LD_LIBRARY_PATH), so the hook gates them as it
gates PyTorch's; torch.cuda.graph captures them on a side stream in the mode asked for. Not
PyTorch: what a real GPU run shows about PyTorch (its runtime, cuBLAS, its allocator) this
cannot."""
import contextlib
import ctypes
import os
import threading

__version__ = "0-dryrun"
half = "half"
MATMUL_US, OP_US = 150, 20
_cu = ctypes.CDLL("libcuda.so.1")
_local = threading.local()
_init_lock = threading.Lock()
_spin = ctypes.c_void_p()
_ctx = ctypes.c_void_p()


def _ck(rc, what):
    if rc:
        name = ctypes.c_char_p()
        _cu.cuGetErrorName(rc, ctypes.byref(name))
        raise RuntimeError(f"CUDA error: {what}: {(name.value or b'?').decode()} ({rc})")


def _init():
    with _init_lock:
        if _spin.value:
            if not getattr(_local, "ctx_set", False):
                _ck(_cu.cuCtxSetCurrent(_ctx), "cuCtxSetCurrent")
                _local.ctx_set = True
            return
        dev, mod = ctypes.c_int(), ctypes.c_void_p()
        ptx = os.path.join(os.environ.get("GSLICE_SRC", "."), "tests/gpu/spin.ptx").encode()
        _ck(_cu.cuInit(0), "cuInit")
        _ck(_cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        _ck(_cu.cuDevicePrimaryCtxRetain(ctypes.byref(_ctx), dev), "cuDevicePrimaryCtxRetain")
        _ck(_cu.cuCtxSetCurrent(_ctx), "cuCtxSetCurrent")
        _local.ctx_set = True
        _ck(_cu.cuModuleLoad(ctypes.byref(mod), ptx), "cuModuleLoad")
        _ck(_cu.cuModuleGetFunction(ctypes.byref(_spin), mod, b"spin"), "cuModuleGetFunction")


def _launch(us):
    _init()
    arg = ctypes.c_uint64(us)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(arg), ctypes.c_void_p))
    _ck(_cu.cuLaunchKernel(_spin, 1, 1, 1, 1, 1, 1, 0, cuda.current_stream().handle, params, None),
        "cuLaunchKernel")


class Tensor:
    def __matmul__(self, other):
        _launch(MATMUL_US)
        return self

    def mul_(self, _):
        _launch(OP_US)
        return self


def randn(*_, **__):
    _init()
    return Tensor()


eye = ones = randn


def equal(a, b):
    return a is b


class _Cuda:
    class Stream:
        def __init__(self, handle=None):
            _init()
            self.handle = handle
            if handle is None:
                self.handle = ctypes.c_void_p()
                _ck(_cu.cuStreamCreate(ctypes.byref(self.handle), 1), "cuStreamCreate")

        def wait_stream(self, other):
            pass  # the stand-in's streams are independent; its tests synchronize

        def synchronize(self):
            _ck(_cu.cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    class CUDAGraph:
        exec_ = None

        def replay(self):
            _ck(_cu.cuGraphLaunch(self.exec_, cuda.current_stream().handle), "cuGraphLaunch")

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def get_device_name(_):
        return "the dry run's stand-in"

    def current_stream(self):
        s = getattr(_local, "stream", None)
        return s or self.Stream(ctypes.c_void_p(0))

    @contextlib.contextmanager
    def stream(self, s):
        old = getattr(_local, "stream", None)
        _local.stream = s
        try:
            yield
        finally:
            _local.stream = old

    @staticmethod
    def synchronize():
        _init()
        _ck(_cu.cuCtxSynchronize(), "cuCtxSynchronize")

    @contextlib.contextmanager
    def graph(self, g, capture_error_mode="global"):
        mode = {"global": 0, "thread_local": 1, "relaxed": 2}[capture_error_mode]
        side = self.Stream()
        graph = ctypes.c_void_p()
        with self.stream(side):
            _ck(_cu.cuStreamBeginCapture_v2(side.handle, mode), "cuStreamBeginCapture")
            try:
                yield
            finally:
                _ck(_cu.cuStreamEndCapture(side.handle, ctypes.byref(graph)), "cuStreamEndCapture")
        g.exec_ = ctypes.c_void_p()
        _ck(_cu.cuGraphInstantiateWithFlags(ctypes.byref(g.exec_), graph, ctypes.c_ulonglong(0)),
            "cuGraphInstantiate")


class _Version:
    cuda = "dryrun"


cuda = _Cuda()
version = _Version()
