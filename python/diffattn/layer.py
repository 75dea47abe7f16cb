"""The attention layer object.

A layer resolves its backend once, at creation, for its role; calls run it on DLPack tensors in DiT
layout: q [B, Sq, Hq, D], k/v [B, Skv, Hkv, D], out [B, Sq, Hq, Dv], optional bool keep-mask
([B, Skv] or [B|1, H|1, Sq, Skv]) and float32 log-sum-exp [B, Hq, Sq].
"""

from __future__ import annotations

import ctypes
from typing import Any

from . import _native, _tensors
from .config import ConfigLike
from .session import PlatformLike, Resolution, Session
from .targets import register_target


class Attention:
    """One attention layer as a model declares it.

    >>> layer = Attention(num_heads=24, head_size=128, role="cross", config={"default": "TORCH_SDPA"})
    >>> out = layer(q, k, v)

    The layer's backend comes from its session's configuration and platform (a new session from
    `config` and `platform`, or `session`). PyTorch tensors run on the caller's current CUDA stream;
    under torch.compile the call is the `torch.ops.diffattn` custom op (no graph break), and eagerly
    the same call without the dispatcher's per-call cost.
    """

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        *,
        num_kv_heads: int | None = None,
        role: str = "self",
        category: str | None = None,
        scale: float | None = None,
        causal: bool = False,
        allow_trtllm_default: bool = False,
        config: ConfigLike = None,
        platform: PlatformLike = None,
        session: Session | None = None,
    ) -> None:
        if session is None:
            session = Session(config=config, platform=platform)
        elif config is not None or platform is not None:
            from .errors import UsageError

            raise UsageError(
                "Attention: pass either session= or config=/platform=, not both (a session already holds both)",
                "invalid_input",
            )
        self._session = session  # keeps the plugins a layer may run alive
        desc = _native.LayerDesc()
        _native.lib.diffattn_layer_desc_init(ctypes.byref(desc))
        desc.num_heads = int(num_heads)
        desc.num_kv_heads = 0 if num_kv_heads is None else int(num_kv_heads)
        desc.head_size = int(head_size)
        desc.has_scale = 0 if scale is None else 1
        desc.scale = 0.0 if scale is None else float(scale)
        desc.causal = int(bool(causal))
        self._role_bytes = role.encode()  # the descriptor points at these while the layer is created
        self._category_bytes = _native.encode(category)
        desc.role = self._role_bytes
        desc.category = self._category_bytes
        desc.allow_trtllm_default = int(bool(allow_trtllm_default))
        handle = ctypes.c_void_p()
        _native.raise_for(_native.lib.diffattn_layer_create(session.handle, ctypes.byref(desc), ctypes.byref(handle)))
        self._handle = handle
        self.num_heads = desc.num_heads
        self.num_kv_heads = desc.num_kv_heads or desc.num_heads
        self.head_size = desc.head_size
        self.role = role
        self.category = category
        self.scale = scale
        self.causal = bool(causal)
        self.backend: str = _native.lib.diffattn_layer_backend(handle).decode()
        self.key = register_target(self)

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            _native.lib.diffattn_layer_destroy(handle)
            self._handle = None

    def __repr__(self) -> str:
        return (
            f"Attention(role={self.role!r}, backend={self.backend!r}, num_heads={self.num_heads}, "
            f"num_kv_heads={self.num_kv_heads}, head_size={self.head_size})"
        )

    def layer_for(self, q: Any, k: Any, scale: float | None, causal: bool) -> Attention:
        """This layer, for a call that asks for no other scale or causality than it was declared with."""
        if (scale is not None and scale != self.scale) or (causal and not self.causal):
            from .errors import InvalidInputError

            raise InvalidInputError(
                f"this layer was declared with scale={self.scale}, causal={self.causal}; a call asked for "
                f"scale={scale}, causal={causal}: declare another Attention layer for it",
                "invalid_input",
            )
        return self

    @property
    def resolution(self) -> Resolution:
        return Resolution.from_json(_native.call_json(_native.lib.diffattn_layer_resolution, self._handle))

    def forward_into(
        self,
        q: Any,
        k: Any,
        v: Any,
        out: Any,
        mask: Any = None,
        lse: Any = None,
        stream: int | None = None,
        step: int | None = None,
        sigma: float | None = None,
        num_steps: int = 0,
        video: VideoLike = None,
        layer_index: int | None = None,
        gate: Any = None,
    ) -> None:
        """Writes attention into `out` (and `lse`), on `stream` or, for PyTorch CUDA tensors, the
        caller's current stream. On an error nothing has been written. `step` (and `sigma`) place the
        call in the denoising loop, which a session with an attention schedule needs. `video`: the
        latent's (frames, height, width) whose tokens the sequence is, or (frames, height, width,
        text_before, text_after) for a joint sequence, which the sparse video backends need;
        `layer_index`: the model's layer of the call (RAINFUSION_ATTN's skip_layers); `gate`:
        FASTVIDEO_VSA's gate, [B, Sq, Hq, Dv]."""
        keep: list[Any] = []
        if stream is None:
            stream = _tensors.current_cuda_stream(q)
        denoising = None
        if step is not None:
            denoising = _native.DenoisingStep(int(step), int(num_steps), int(sigma is not None), float(sigma or 0.0))
        tensors = (
            self._handle,
            _tensors.borrow(q, "q", keep),
            _tensors.borrow(k, "k", keep),
            _tensors.borrow(v, "v", keep),
            _tensors.borrow(out, "out", keep),
            _tensors.borrow(mask, "mask", keep),
            _tensors.borrow(lse, "lse", keep),
        )
        if video is None and layer_index is None and gate is None:  # the common call, with the least work
            step_ref = ctypes.byref(denoising) if denoising is not None else None
            code = _native.lib.diffattn_layer_forward_step(*tensors, step_ref, stream)
        else:
            extras = _native.CallExtras()
            _native.lib.diffattn_call_extras_init(ctypes.byref(extras))
            if denoising is not None:
                extras.step = ctypes.pointer(denoising)
            geometry = _video_geometry(video)
            if geometry is not None:
                extras.video = ctypes.pointer(geometry)
            if layer_index is not None:
                extras.layer_index = int(layer_index)
            extras.gate = _address(_tensors.borrow(gate, "gate", keep))
            code = _native.lib.diffattn_layer_forward_ex(*tensors, ctypes.byref(extras), stream)
        if code:
            _native.raise_for(code)

    def __call__(
        self,
        q: Any,
        k: Any,
        v: Any,
        mask: Any = None,
        *,
        out: Any = None,
        lse: Any = None,
        return_lse: bool = False,
        stream: int | None = None,
        step: int | None = None,
        sigma: float | None = None,
        video: VideoLike = None,
        layer_index: int | None = None,
        gate: Any = None,
        num_steps: int = 0,
    ) -> Any:
        """Attention of q over k/v: returns out, or (out, lse) with return_lse (or lse= given).
        `step` and `sigma`: the denoising step, for a session with an attention schedule (`num_steps`:
        the generation's steps, where known, for RAINFUSION_ATTN's end_step); `video`,
        `layer_index` and `gate`: what the sparse video backends read (forward_into says how)."""
        if stream is None and _tensors.torch_compiling(q):
            from . import torch_ops

            if video is not None:
                _video_geometry_values(video)  # a wrong shape is refused while tracing, as eagerly
            return torch_ops.call(self.key, q, k, v, mask, out, lse, return_lse, self.scale, self.causal,
                                  video=video, step=step, sigma=sigma, layer_index=layer_index, gate=gate,
                                  num_steps=num_steps)
        want_lse = return_lse or lse is not None
        if out is None:
            out = _tensors.empty_like_out(q, _out_shape(q, v))
        if want_lse and lse is None:
            lse = _tensors.empty_like_out(q, _lse_shape(q), float32=True)
        self.forward_into(q, k, v, out, mask, lse if want_lse else None, stream, step, sigma, num_steps,
                          video=video, layer_index=layer_index, gate=gate)
        return (out, lse) if want_lse else out


VideoLike = Any  # (frames, height, width) or (frames, height, width, text_before, text_after), or None


def _address(pointer: Any) -> int | None:
    """The address behind what _tensors.borrow returns (a c_void_p, or a byref to a DLTensor)."""
    if pointer is None:
        return None
    if isinstance(pointer, ctypes.c_void_p):
        return pointer.value
    return ctypes.addressof(pointer._obj)


def _video_geometry_values(video: VideoLike) -> tuple[Any, ...]:
    """`video`'s integers (3 or 5 of them); a wrong shape is a UsageError saying what to pass."""
    try:
        values = tuple(video)
    except TypeError:  # not a sequence: refused below
        values = (video,)
    if len(values) not in (3, 5) or not all(isinstance(x, int) or hasattr(x, "__index__") for x in values):
        from .errors import UsageError

        raise UsageError(f"video= takes (frames, height, width) or (frames, height, width, text_before, text_after) "
                         f"as integers, got {video!r}", "invalid_input")
    return values


def _video_geometry(video: VideoLike) -> Any:
    """The C geometry of `video`, None for none; a wrong shape is a UsageError saying what to pass."""
    if video is None:
        return None
    values = tuple(int(x) for x in _video_geometry_values(video))
    return _native.VideoGeometry(*(values + (0, 0)[: 5 - len(values)]))


def _out_shape(q: Any, v: Any) -> tuple[int, ...]:
    """[B, Sq, Hq, Dv]; a q or v of the wrong rank gets the core's message when the call is made."""
    q_shape, v_shape = tuple(q.shape), tuple(v.shape)
    if len(q_shape) != 4 or len(v_shape) != 4:
        return q_shape
    return q_shape[:3] + v_shape[3:]


def _lse_shape(q: Any) -> tuple[int, ...]:
    shape = tuple(q.shape)
    return (shape[0], shape[2], shape[1]) if len(shape) == 4 else (0,)
