"""PyTorch custom ops (torch.library), so torch.compile traces diffattn calls without graph breaks
and CUDA graphs capture them.

Ops take tensors and a `target` key: an Attention layer, or a Route (a session and a role whose layer
is chosen by the call's shapes; the diffusers integration uses these). Each op has a fake
implementation giving output shapes and dtypes without running anything.

  torch.ops.diffattn.attention(q, k, v, mask, target, scale, causal) -> out
  torch.ops.diffattn.attention_lse(q, k, v, mask, target, scale, causal) -> (out, lse)
  torch.ops.diffattn.attention_out(q, k, v, mask, out, lse, target, scale, causal) -> None  (in place)
  torch.ops.diffattn.attention_ex_out(q, k, v, mask, gate, out, lse, target, scale, causal, video, step,
                                      sigma, layer_index, num_steps=0) -> None  (in place)

  torch.ops.diffattn.keep_mask_from_additive(mask) -> bool keep-mask

keep_mask_from_additive reads an additive float mask of 0 (keep) and large negatives (drop), as
diffusers builds them, as the boolean keep-mask that gives the same softmax, and refuses any other
(its values are checked where the op runs, so it compiles as one opaque op).

attention_ex_out carries what a call may add beyond the tensors (Attention.__call__'s step=, sigma=,
video=, layer_index= and gate=): the denoising step for a session with an attention schedule, and
what the sparse video backends read. Its integers may be symbolic (SymInt) under torch.compile, so a
video geometry taken from a traced tensor's shape passes through without a graph break.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from . import targets as _targets


def _out_shape(q: torch.Tensor, v: torch.Tensor) -> list[int]:
    return [*q.shape[:3], v.shape[3]] if q.dim() == 4 and v.dim() == 4 else list(q.shape)


def _lse_shape(q: torch.Tensor) -> list[int]:
    return [q.shape[0], q.shape[2], q.shape[1]] if q.dim() == 4 else [0]


def _step_of(target: Any, step: Optional[int], num_steps: int) -> tuple[Optional[int], int]:
    """The call's step: the one given, else the step its route holds where one is set (the diffusers
    integration's set_step), read when the op runs, so a compiled graph does not specialise on it."""
    if step is None:
        state = getattr(target, "state", None)
        if state is not None and getattr(state, "step", None) is not None:
            return state.step, state.num_steps
    return step, num_steps


def _run(q, k, v, mask, out, lse, target: int, scale: Optional[float], causal: bool) -> None:
    routed = _targets.target_by_key(target)
    step, num_steps = _step_of(routed, None, 0)
    routed.layer_for(q, k, scale, causal).forward_into(q, k, v, out, mask, lse, None, step, None, num_steps)


def _run_ex(q, k, v, mask, gate, out, lse, target, scale, causal, video, step, sigma, layer_index,
            num_steps=0) -> None:
    routed = _targets.target_by_key(target)
    step, num_steps = _step_of(routed, step, num_steps)
    routed.layer_for(q, k, scale, causal).forward_into(
        q, k, v, out, mask, lse, None, step, sigma, num_steps, video=None if video is None else tuple(video),
        layer_index=layer_index, gate=gate)


# An additive mask value at or below this drops its key: diffusers builds additive masks as
# (1 - keep) * -10000 (or with -inf), and exp(-5000) is 0 in every float format.
ADDITIVE_DROP = -5000.0


def _keep_shape(mask: torch.Tensor) -> list[int]:
    """A [B, H, 1, Skv] mask (one row per head, as diffusers' prepare_attention_mask repeats it)
    becomes [B, 1, 1, Skv]; any other shape is kept."""
    shape = list(mask.shape)
    if len(shape) == 4 and shape[1] > 1 and shape[2] == 1:
        shape[1] = 1
    return shape


def _keep_mask_from_additive(mask: torch.Tensor) -> torch.Tensor:
    """The boolean keep-mask an additive float mask stands for: values 0 (keep) or at most
    ADDITIVE_DROP (drop), at least one key kept in every row, the heads of a [B, H, 1, Skv] mask
    equal. Anything else (a bias; a row that keeps nothing, whose additive softmax is over every key)
    is refused. Reading the values costs one device synchronisation."""
    keep = mask == 0
    ok = (keep | (mask <= ADDITIVE_DROP)).all() & keep.any(dim=-1).all()
    if list(mask.shape) != _keep_shape(mask):
        ok = ok & (keep == keep[:, :1]).all()
        keep = keep[:, :1]
    if not bool(ok):
        from .errors import InvalidInputError

        raise InvalidInputError(
            f"this model passes an additive float attention mask that is not a keep-mask: diffattn reads one whose "
            f"values are 0 (keep) or at most {ADDITIVE_DROP:g} (drop, as diffusers' (1 - mask) * -10000 builds), "
            "with at least one key kept in every row and one row for all heads; for a bias, leave this role to "
            "diffusers' attention with diffattn.diffusers.apply(..., roles=[...])",
            "invalid_input",
        )
    return keep.contiguous() if keep.shape != mask.shape else keep


# Defined with torch.library.Library rather than torch.library.custom_op: the same schema and fake
# implementations, at about a fifth of custom_op's per-call dispatch cost (python/bench/overhead.py).
_library = torch.library.Library("diffattn", "DEF")
_library.define(
    "attention_out(Tensor q, Tensor k, Tensor v, Tensor? mask, Tensor(a!) out, Tensor(b!)? lse, int target, "
    "float? scale, bool causal) -> ()"
)
_library.define(
    "attention_ex_out(Tensor q, Tensor k, Tensor v, Tensor? mask, Tensor? gate, Tensor(a!) out, Tensor(b!)? lse, "
    "int target, float? scale, bool causal, SymInt[]? video, SymInt? step, float? sigma, SymInt? layer_index, "
    "SymInt num_steps=0) -> ()"
)
_library.define("keep_mask_from_additive(Tensor mask) -> Tensor")
_library.define("attention(Tensor q, Tensor k, Tensor v, Tensor? mask, int target, float? scale, bool causal) -> Tensor")
_library.define(
    "attention_lse(Tensor q, Tensor k, Tensor v, Tensor? mask, int target, float? scale, bool causal) -> (Tensor, Tensor)"
)


def _attention_out(q, k, v, mask, out, lse, target, scale, causal) -> None:
    _run(q, k, v, mask, out, lse, target, scale, causal)


def _attention_ex_out(q, k, v, mask, gate, out, lse, target, scale, causal, video, step, sigma, layer_index,
                      num_steps=0) -> None:
    _run_ex(q, k, v, mask, gate, out, lse, target, scale, causal, video, step, sigma, layer_index, num_steps)


def _attention(q, k, v, mask, target, scale, causal) -> torch.Tensor:
    out = q.new_empty(_out_shape(q, v))
    _run(q, k, v, mask, out, None, target, scale, causal)
    return out


def _attention_lse(q, k, v, mask, target, scale, causal) -> tuple[torch.Tensor, torch.Tensor]:
    out = q.new_empty(_out_shape(q, v))
    lse = q.new_empty(_lse_shape(q), dtype=torch.float32)
    _run(q, k, v, mask, out, lse, target, scale, causal)
    return out, lse


_library.impl("attention_out", _attention_out, "CompositeExplicitAutograd")
_library.impl("attention_ex_out", _attention_ex_out, "CompositeExplicitAutograd")
_library.impl("keep_mask_from_additive", _keep_mask_from_additive, "CompositeExplicitAutograd")
_library.impl("attention", _attention, "CompositeExplicitAutograd")
_library.impl("attention_lse", _attention_lse, "CompositeExplicitAutograd")


@torch.library.register_fake("diffattn::attention_out", lib=_library)
def _attention_out_fake(q, k, v, mask, out, lse, target, scale, causal) -> None:
    return None


@torch.library.register_fake("diffattn::attention_ex_out", lib=_library)
def _attention_ex_out_fake(q, k, v, mask, gate, out, lse, target, scale, causal, video, step, sigma,
                           layer_index, num_steps=0) -> None:
    return None


@torch.library.register_fake("diffattn::keep_mask_from_additive", lib=_library)
def _keep_mask_from_additive_fake(mask) -> torch.Tensor:
    return mask.new_empty(_keep_shape(mask), dtype=torch.bool)


@torch.library.register_fake("diffattn::attention", lib=_library)
def _attention_fake(q, k, v, mask, target, scale, causal) -> torch.Tensor:
    return q.new_empty(_out_shape(q, v))


@torch.library.register_fake("diffattn::attention_lse", lib=_library)
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
    *,
    video: Optional[Sequence[int]] = None,
    step: Optional[int] = None,
    sigma: Optional[float] = None,
    layer_index: Optional[int] = None,
    gate: Optional[torch.Tensor] = None,
    num_steps: int = 0,
) -> Any:
    """The op that fits the arguments: in place into out/lse when given, else a new output; a call
    with a video geometry, a step, a layer index or a gate goes through attention_ex_out."""
    ops = torch.ops.diffattn
    want_lse = return_lse or lse is not None
    extras = video is not None or step is not None or layer_index is not None or gate is not None
    if extras or out is not None or lse is not None:
        if out is None:
            out = q.new_empty(_out_shape(q, v))
        if want_lse and lse is None:
            lse = q.new_empty(_lse_shape(q), dtype=torch.float32)
        if extras:
            ops.attention_ex_out(q, k, v, mask, gate, out, lse, target, scale, causal,
                                 None if video is None else list(video), step, sigma, layer_index, num_steps)
        else:
            ops.attention_out(q, k, v, mask, out, lse, target, scale, causal)
        return (out, lse) if want_lse else out
    if want_lse:
        return ops.attention_lse(q, k, v, mask, target, scale, causal)
    return ops.attention(q, k, v, mask, target, scale, causal)
