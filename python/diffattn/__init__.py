"""diffattn: attention backends for diffusion transformers, per role, from Python.

    import diffattn
    config = diffattn.AttentionConfig(
        default=diffattn.AttentionSpec(backend="FLASH_ATTN"),
        per_role={"cross": diffattn.AttentionSpec(backend="TORCH_SDPA")},
    )
    out = diffattn.attention(q, k, v, role="cross", config=config)

See docs/python.md. Everything runs through libdiffattn.so's C interface: configuration rules,
backend selection, error messages and kernels are the C++ core's.
"""

from __future__ import annotations

from . import errors
from ._native import version as _version
from .config import AttentionConfig, AttentionSpec, AttnQuantSpec, BlockSparseSpec, SkipSoftmaxSpec
from .errors import (
    CannotRunHereError,
    CudaError,
    DiffattnError,
    InternalError,
    InvalidConfigError,
    InvalidInputError,
    RuntimeFailure,
    UnavailableError,
    UnknownBackendError,
    UnsupportedError,
    UsageError,
)
from .functional import attention
from .layer import Attention
from .session import Considered, Platform, Resolution, Session, TunedElsewhereWarning
from .tune import tune

__version__ = _version()


def resolve(
    role: str,
    head_size: int,
    category: str | None = None,
    *,
    config=None,
    platform=None,
    allow_trtllm_default: bool = False,
) -> Resolution:
    """The backend, spec and source `role` resolves to under `config` on `platform` (probed if None)."""
    return Session(config=config, platform=platform).resolve(role, head_size, category, allow_trtllm_default)


def _register_torch_ops() -> None:
    """Registers torch.ops.diffattn when PyTorch is importable (it is optional)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    from . import torch_ops  # noqa: F401


_register_torch_ops()

__all__ = [
    "Attention",
    "AttentionConfig",
    "AttentionSpec",
    "AttnQuantSpec",
    "BlockSparseSpec",
    "CannotRunHereError",
    "Considered",
    "CudaError",
    "DiffattnError",
    "InternalError",
    "InvalidConfigError",
    "InvalidInputError",
    "Platform",
    "Resolution",
    "RuntimeFailure",
    "Session",
    "SkipSoftmaxSpec",
    "TunedElsewhereWarning",
    "UnavailableError",
    "UnknownBackendError",
    "UnsupportedError",
    "UsageError",
    "attention",
    "errors",
    "resolve",
    "tune",
]
