"""PyTorch custom ops (torch.library), so torch.compile traces diffattn calls without graph breaks
and CUDA graphs capture them.

Ops take tensors and a `target` key: an Attention layer, or a Route (a session and a role whose layer
is chosen by the call's shapes; the diffusers integration uses these). Each op has a fake
implementation giving output shapes and dtypes without running anything.

  torch.ops.diffattn.attention(q, k, v, mask, target, scale, causal) -> out
  torch.ops.diffattn.attention_lse(q, k, v, mask, target, scale, causal) -> (out, lse)
  torch.ops.diffattn.attention_out(q, k, v, mask, out, lse, target, scale, causal) -> None  (in place)
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from . import layer as _layer


def _out_shape(q: torch.Tensor, v: torch.Tensor) -> list[int]:
    return [*q.shape[:3], v.shape[3]] if q.dim() == 4 and v.dim() == 4 else list(q.shape)


def _lse_shape(q: torch.Tensor) -> list[int]:
    return [q.shape[0], q.shape[2], q.shape[1]] if q.dim() == 4 else [0]


def _run(q, k, v, mask, out, lse, target: int, scale: Optional[float], causal: bool) -> None:
    _layer.target_by_key(target).layer_for(q, k, scale, causal).forward_into(q, k, v, out, mask, lse)


@torch.library.custom_op("diffattn::attention_out", mutates_args=("out", "lse"))
def attention_out(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: Optional[torch.Tensor],
    out: torch.Tensor,
    lse: Optional[torch.Tensor],
    target: int,
    scale: Optional[float],
    causal: bool,
) -> None:
    _run(q, k, v, mask, out, lse, target, scale, causal)


@attention_out.register_fake
def _attention_out_fake(q, k, v, mask, out, lse, target, scale, causal) -> None:
    return None


@torch.library.custom_op("diffattn::attention", mutates_args=())
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: Optional[torch.Tensor],
    target: int,
    scale: Optional[float],
    causal: bool,
) -> torch.Tensor:
    out = q.new_empty(_out_shape(q, v))
    _run(q, k, v, mask, out, None, target, scale, causal)
    return out


@attention.register_fake
def _attention_fake(q, k, v, mask, target, scale, causal) -> torch.Tensor:
    return q.new_empty(_out_shape(q, v))


@torch.library.custom_op("diffattn::attention_lse", mutates_args=())
def attention_lse(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: Optional[torch.Tensor],
    target: int,
    scale: Optional[float],
    causal: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    out = q.new_empty(_out_shape(q, v))
    lse = q.new_empty(_lse_shape(q), dtype=torch.float32)
    _run(q, k, v, mask, out, lse, target, scale, causal)
    return out, lse


@attention_lse.register_fake
def _attention_lse_fake(q, k, v, mask, target, scale, causal) -> tuple[torch.Tensor, torch.Tensor]:
    return q.new_empty(_out_shape(q, v)), q.new_empty(_lse_shape(q), dtype=torch.float32)


def call(
    target: int,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: Optional[torch.Tensor],
    out: Optional[torch.Tensor],
    lse: Optional[torch.Tensor],
    return_lse: bool,
    scale: Optional[float] = None,
    causal: bool = False,
) -> Any:
    """The op that fits the arguments: in place into out/lse when given, else a new output."""
    ops = torch.ops.diffattn
    want_lse = return_lse or lse is not None
    if out is not None or lse is not None:
        if out is None:
            out = q.new_empty(_out_shape(q, v))
        if want_lse and lse is None:
            lse = q.new_empty(_lse_shape(q), dtype=torch.float32)
        ops.attention_out(q, k, v, mask, out, lse, target, scale, causal)
        return (out, lse) if want_lse else out
    if want_lse:
        return ops.attention_lse(q, k, v, mask, target, scale, causal)
    return ops.attention(q, k, v, mask, target, scale, causal)
