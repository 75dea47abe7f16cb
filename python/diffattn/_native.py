"""The binding: libdiffattn.so's C interface (include/diffattn/c_api.h) through ctypes.

Nothing here validates: every rule and message lives in the C++ core, and a failed call raises the
exception class of its code with the core's message.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from . import errors

_LIBRARY_NAME = "libdiffattn.so"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class LayerDesc(ctypes.Structure):
    _fields_ = [
        ("num_heads", ctypes.c_int),
        ("num_kv_heads", ctypes.c_int),
        ("head_size", ctypes.c_int),
        ("has_scale", ctypes.c_int),
        ("scale", ctypes.c_float),
        ("causal", ctypes.c_int),
        ("role", ctypes.c_char_p),
        ("category", ctypes.c_char_p),
        ("allow_trtllm_default", ctypes.c_int),
    ]


class DenoisingStep(ctypes.Structure):
    _fields_ = [
        ("index", ctypes.c_longlong),
        ("num_steps", ctypes.c_longlong),
        ("has_sigma", ctypes.c_int),
        ("sigma", ctypes.c_double),
    ]


class VideoGeometry(ctypes.Structure):
    _fields_ = [
        ("frames", ctypes.c_longlong),
        ("height", ctypes.c_longlong),
        ("width", ctypes.c_longlong),
        ("text_before", ctypes.c_longlong),
        ("text_after", ctypes.c_longlong),
    ]


class CallExtras(ctypes.Structure):
    _fields_ = [
        ("step", ctypes.POINTER(DenoisingStep)),
        ("video", ctypes.POINTER(VideoGeometry)),
        ("layer_index", ctypes.c_longlong),
        ("gate", ctypes.c_void_p),
    ]


def _candidates() -> list[Path]:
    """DIFFATTN_LIBRARY (a build tree's library, for tests), then the one installed with the package."""
    found = []
    if os.environ.get("DIFFATTN_LIBRARY"):
        found.append(Path(os.environ["DIFFATTN_LIBRARY"]))
    found.append(Path(__file__).with_name(_LIBRARY_NAME))
    return found


def _preload_cuda_libraries_from_wheels() -> bool:
    """Loads the CUDA runtime, NVRTC and cuDNN from NVIDIA's Python wheels (PyTorch's), when present,
    so that a CUDA build of the library finds them without LD_LIBRARY_PATH."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return False
    loaded = False
    for root in spec.submodule_search_locations:
        for pattern in ("libcudart.so.*", "libnvrtc.so.*", "libcudnn.so.*"):
            for library in sorted(Path(root).glob(f"*/lib/{pattern}"))[:1]:
                try:
                    ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
                    loaded = True
                except OSError:
                    continue
    return loaded


def _open(path: Path) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(str(path))
    except OSError as first:
        if _preload_cuda_libraries_from_wheels():
            try:
                return ctypes.CDLL(str(path))
            except OSError:
                pass
        raise ImportError(
            f"diffattn: {path} could not be loaded ({first}). A CUDA build needs the CUDA runtime, NVRTC and "
            "cuDNN on the library path: add their folders to LD_LIBRARY_PATH (PyTorch's: python -c 'import "
            "nvidia.cudnn as m; print(m.__path__[0])'), or install a CPU-only build "
            "(pip install . -C cmake.define.DIFFATTN_ENABLE_CUDA=OFF)"
        ) from first


def _load() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        if path.is_file():
            return _open(path)
        tried.append(str(path))
    raise ImportError(
        f"diffattn: {_LIBRARY_NAME} not found (looked at {', '.join(tried)}); install the package with "
        "`pip install .` from the repository, or set DIFFATTN_LIBRARY to a built libdiffattn.so"
    )


lib = _load()

_c_char_pp = ctypes.POINTER(ctypes.c_char_p)
_p = ctypes.c_void_p
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "diffattn_last_error": (ctypes.c_char_p, []),
    "diffattn_code_name": (ctypes.c_char_p, [ctypes.c_int]),
    "diffattn_version": (ctypes.c_char_p, []),
    "diffattn_exit_code": (ctypes.c_int, [ctypes.c_int]),
    "diffattn_config_normalise": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_p)]),
    "diffattn_spec_normalise": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_p)]),
    "diffattn_session_create": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_p)]),
    "diffattn_session_destroy": (None, [_p]),
    "diffattn_session_config": (ctypes.c_int, [_p, ctypes.POINTER(_p)]),
    "diffattn_session_platform": (ctypes.c_int, [_p, ctypes.POINTER(_p), ctypes.POINTER(_p)]),
    "diffattn_session_tuning_warning": (ctypes.c_int, [_p, ctypes.c_char_p, ctypes.POINTER(_p)]),
    "diffattn_session_load_plugin": (ctypes.c_int, [_p, ctypes.c_char_p, ctypes.POINTER(_p)]),
    "diffattn_resolve": (ctypes.c_int, [_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_p)]),
    "diffattn_string_free": (None, [_p]),
    "diffattn_layer_desc_init": (None, [ctypes.POINTER(LayerDesc)]),
    "diffattn_layer_create": (ctypes.c_int, [_p, ctypes.POINTER(LayerDesc), ctypes.POINTER(_p)]),
    "diffattn_layer_destroy": (None, [_p]),
    "diffattn_layer_backend": (ctypes.c_char_p, [_p]),
    "diffattn_layer_resolution": (ctypes.c_int, [_p, ctypes.POINTER(_p)]),
    "diffattn_layer_forward": (ctypes.c_int, [_p, _p, _p, _p, _p, _p, _p, _p]),
    "diffattn_session_set_schedule": (ctypes.c_int, [_p, ctypes.c_char_p]),
    "diffattn_layer_forward_step": (ctypes.c_int, [_p, _p, _p, _p, _p, _p, _p, ctypes.POINTER(DenoisingStep), _p]),
    "diffattn_call_extras_init": (None, [ctypes.POINTER(CallExtras)]),
    "diffattn_layer_forward_ex": (ctypes.c_int, [_p, _p, _p, _p, _p, _p, _p, ctypes.POINTER(CallExtras), _p]),
}
for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes


def error_class(code: int) -> type[errors.DiffattnError]:
    """The exception class of a C code: its own class, else the base of its CLI exit-code class."""
    name = lib.diffattn_code_name(code).decode()
    if name in errors.BY_CODE:
        return errors.BY_CODE[name]
    return {2: errors.UsageError, 3: errors.CannotRunHereError}.get(lib.diffattn_exit_code(code), errors.DiffattnError)


def raise_for(code: int) -> None:
    """Raises the exception of a failed call (code != 0) with the core's message for this thread."""
    if code == 0:
        return
    message = lib.diffattn_last_error().decode("utf-8", "replace")
    raise error_class(code)(message, lib.diffattn_code_name(code).decode())


def take_string(pointer: ctypes.c_void_p) -> str:
    """The text of a string the library allocated, released."""
    try:
        return ctypes.string_at(pointer.value).decode("utf-8", "replace")
    finally:
        lib.diffattn_string_free(pointer)


def call_json(function: Any, *args: Any) -> Any:
    """Calls a C function whose last argument is `char** out_json` and returns the parsed JSON."""
    out = ctypes.c_void_p()
    raise_for(function(*args, ctypes.byref(out)))
    return json.loads(take_string(out))


def encode(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def version() -> str:
    return lib.diffattn_version().decode()
