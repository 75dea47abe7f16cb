"""Tensors as DLPack DLTensor views, borrowed for one call: no copy, no ownership taken.

PyTorch tensors are described from their attributes (pointer, shape, strides) directly, into DLTensors
reused per thread and argument position: the cheapest path (the per-call overhead goal,
docs/python.md), with no stream handshake. Anything
else goes through the DLPack protocol (`__dlpack__`), whose capsule is kept until the call returns.
Neither path checks shapes or dtypes: the core does, with its messages.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

from ._native import DLDataType, DLDevice, DLTensor

_KDL_CPU = 1
_KDL_CUDA = 2

_get_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_capsule_pointer.restype = ctypes.c_void_p
_get_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

_torch_dtypes: dict[Any, tuple[int, int]] | None = None


def _torch_dtype_table(torch: Any) -> dict[Any, tuple[int, int]]:
    global _torch_dtypes
    if _torch_dtypes is None:
        # (DLPack type code, bits): float 2, bfloat 4, int 0, bool 6 (DLPack 0.8's kDLBool).
        _torch_dtypes = {
            torch.float32: (2, 32),
            torch.float16: (2, 16),
            torch.float64: (2, 64),
            torch.bfloat16: (4, 16),
            torch.int8: (0, 8),
            torch.int32: (0, 32),
            torch.bool: (6, 8),
        }
    return _torch_dtypes


def is_torch_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


class _TorchSlot:
    """One reusable DLTensor for a PyTorch argument position on one thread. Its shape, strides, dtype and
    device are rebuilt only when they change; each call sets the data pointer alone (the per-call cost)."""

    __slots__ = ("key", "view", "ref")

    def __init__(self) -> None:
        self.key: Any = None
        self.view = DLTensor()
        self.ref = ctypes.byref(self.view)

    def describe(self, tensor: Any, key: Any) -> bool:
        torch = sys.modules["torch"]
        kind = _torch_dtype_table(torch).get(tensor.dtype)
        device = tensor.device
        if kind is None or device.type not in ("cpu", "cuda"):
            return False  # the DLPack path reports what the core makes of it
        n = tensor.dim()
        view = self.view
        view.device = DLDevice(_KDL_CUDA if device.type == "cuda" else _KDL_CPU, device.index or 0)
        view.ndim = n
        view.dtype = DLDataType(kind[0], kind[1], 1)
        # Assigning the arrays keeps them alive with the struct (ctypes records them in _objects).
        view.shape = (ctypes.c_int64 * n)(*tensor.shape)
        view.strides = (ctypes.c_int64 * n)(*tensor.stride())
        self.key = key
        return True


_SLOT_NAMES = ("q", "k", "v", "out", "mask", "lse")
_scratch = threading.local()


def _torch_slot(name: str) -> _TorchSlot:
    slots = getattr(_scratch, "slots", None)
    if slots is None:
        slots = _scratch.slots = {n: _TorchSlot() for n in _SLOT_NAMES}
    slot = slots.get(name)
    if slot is None:
        slot = slots[name] = _TorchSlot()
    return slot


def _from_torch(tensor: Any, name: str) -> Any:
    """A byref to this thread's DLTensor for argument `name`, valid until the next call on this thread."""
    slot = _torch_slot(name)
    key = (tensor.shape, tensor.stride(), tensor.dtype, tensor.device)
    if key != slot.key and not slot.describe(tensor, key):
        return None
    slot.view.data = tensor.data_ptr()
    return slot.ref


class _Borrowed:
    """A DLTensor over a DLPack capsule; the capsule (and so the producer's memory) lives as long as this."""

    __slots__ = ("capsule",)

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule


def borrow(value: Any, name: str, keep: list[Any]) -> Any:
    """A pointer to a DLTensor describing `value`, valid while `keep` (which this appends to) lives."""
    if value is None:
        return None
    if is_torch_tensor(value):
        view = _from_torch(value, name)
        if view is not None:
            return view
    exporter = getattr(value, "__dlpack__", None)
    if exporter is None:
        from .errors import InvalidInputError

        raise InvalidInputError(
            f"{name}: a {type(value).__name__} is not a DLPack tensor; pass a NumPy array, a PyTorch tensor "
            "or another object with __dlpack__",
            "invalid_input",
        )
    try:
        capsule = exporter()
    except (BufferError, TypeError, ValueError) as e:  # e.g. NumPy refuses to export a read-only array
        from .errors import InvalidInputError

        raise InvalidInputError(f"{name}: the array cannot be passed by DLPack: {e}", "invalid_input") from e
    keep.append(_Borrowed(capsule))
    # An unconsumed "dltensor" capsule points at a DLManagedTensor, whose first member is the DLTensor.
    return ctypes.c_void_p(_get_capsule_pointer(capsule, b"dltensor"))


def torch_compiling(value: Any) -> bool:
    """Whether a PyTorch tensor is being traced by torch.compile (calls must then be custom ops)."""
    if not is_torch_tensor(value):
        return False
    return sys.modules["torch"].compiler.is_compiling()


def current_cuda_stream(tensor: Any) -> int | None:
    """The caller's current CUDA stream for a PyTorch CUDA tensor's device, else None."""
    if not is_torch_tensor(tensor) or tensor.device.type != "cuda":
        return None
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # the same handle, without a Stream object
    if raw is not None:
        return raw(tensor.device.index if tensor.device.index is not None else torch.cuda.current_device())
    return torch.cuda.current_stream(tensor.device).cuda_stream


def empty_like_out(q: Any, shape: tuple[int, ...], float32: bool = False) -> Any:
    """A new uninitialised array from q's library, on q's device: q's dtype, or float32 (LSE)."""
    if is_torch_tensor(q):
        if float32:
            return q.new_empty(shape, dtype=sys.modules["torch"].float32)
        # empty_like is PyTorch's cheapest allocation; it serves whenever out has q's shape.
        return sys.modules["torch"].empty_like(q) if shape == tuple(q.shape) else q.new_empty(shape)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(q, numpy.ndarray):
        return numpy.empty(shape, dtype=numpy.float32 if float32 else q.dtype)
    namespace = getattr(q, "__array_namespace__", None)
    if namespace is not None:
        xp = namespace()
        return xp.empty(shape, dtype=xp.float32 if float32 else q.dtype, device=q.device)
    from .errors import InvalidInputError

    raise InvalidInputError(
        f"cannot allocate an output like a {type(q).__name__}; pass out= (and lse= for the log-sum-exp)",
        "invalid_input",
    )
