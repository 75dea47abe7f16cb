"""Run a diffusers transformer's attention through diffattn, per role.

    import diffattn.diffusers
    resolutions = diffattn.diffusers.apply(transformer, config={"default": "FLASH_ATTN",
                                                                "per_role": {"cross": "CUDNN_ATTN"}})
    ...
    diffattn.diffusers.remove(transformer)   # back to diffusers' own attention

Most of diffusers' attention processors call `dispatch_attention_fn(q, k, v, ..., backend=processor._attention_backend)`
with q/k/v in [B, S, H, D], diffattn's layout. `apply` gives each attention module's processor (a copy of
it, so modules sharing one stay independent) a Route as its backend, and wraps the dispatch function in
the processor's module so that a Route runs `torch.ops.diffattn.attention`; any other backend value goes
to diffusers unchanged. The processors of diffusers.models.attention_processor (SD3's joint blocks,
CogVideoX, HunyuanVideo's token refiner) call torch's `F.scaled_dot_product_attention` on [B, H, S, D]
instead: that module gets an `F` of its own whose SDPA goes to diffattn (by transposed views) while a
routed processor's call is in progress, and is torch's everywhere else; each such processor is
wrapped so that its role's route is active during its calls. Additive float masks of 0 and -10000 (or
-inf), as many diffusers models build from a keep-mask (LTX's cross-attention), become that keep-mask
through the checked op keep_mask_from_additive; any other float mask is refused. Roles: a module
diffusers marks as cross-attention (or, without that flag, one named `attn2` or `<a>_to_<b>_attn`) is
"cross"; one with added key/value projections (text and image tokens attended together, as in Flux's
double-stream blocks) is "joint" (category "self"); one under a token refiner (self-attention over the prompt
alone) is "text"; any other is "self". Each role's resolution is logged once, at `apply`.

The sparse video backends (FASTVIDEO_VSA, RAINFUSION_ATTN) need each call's latent video geometry. For
a video transformer whose `hidden_states` is [B, C, F, H, W] and whose config gives its patch size
(`patch_size` (t, h, w), or `patch_size` with `patch_size_t`, as Wan and HunyuanVideo do), `apply`
records (F / t, H / h, W / w) at every forward (CogVideoX's [B, F, C, H, W] and LTX's packed latents
with their num_frames / height / width arguments too) and passes it with each call whose query length
is that many tokens, or that many plus the text of a joint sequence in the models that have one
(_JOINT_TEXT); other calls carry none. Under torch.compile the hook is traced with the forward
and the geometry reaches the custom op (torch.ops.diffattn.attention_ex_out) as integers, so the
sparse video backends run compiled too.
"""

from __future__ import annotations

import copy
import inspect
import types
from typing import Any

import torch

from . import errors, torch_ops  # noqa: F401  (torch_ops registers torch.ops.diffattn)
from .config import ConfigLike
from .targets import Route
from .session import PlatformLike, Resolution, Session

_ORIGINAL_PROCESSOR = "_diffattn_original_processor"
_WRAPPED_MARK = "_diffattn_wraps"
_GEOMETRY_HOOK = "_diffattn_geometry_hook"


# Video transformers whose joint attention runs text and video tokens as one sequence: where the text
# stands (HunyuanVideo's blocks append it; CogVideoX's put it first).
_JOINT_TEXT = {
    "HunyuanVideoTransformer3DModel": "after",
    "HunyuanVideo15Transformer3DModel": "after",
    "CogVideoXTransformer3DModel": "before",
}
# Latent layouts other than [B, C, F, H, W]: CogVideoX's [B, F, C, H, W]; LTX's and LTX-2's packed
# [B, S, C] with the sizes given as num_frames, height and width.
_LAYOUT = {
    "CogVideoXTransformer3DModel": "BFCHW",
    "LTXVideoTransformer3DModel": "packed",
    "LTX2VideoTransformer3DModel": "packed",
}


class _ModelState:
    """What a routed model's calls carry besides their tensors: the latent video of the forward in
    progress (frames, height, width), or None; `text`, where a joint sequence's text tokens stand
    ("before", "after" or None: no joint sequences); `step` and `num_steps`, the denoising step
    (None: none). Its routes hold it as `state`, the model as `_diffattn_state`."""

    def __init__(self, text: str | None = None) -> None:
        self.video: tuple[int, int, int] | None = None
        self.text = text
        self.step: int | None = None  # the denoising step of the next calls (set_step, step_callback)
        self.num_steps = 0

    def for_tokens(self, tokens: int) -> tuple[int, ...] | None:
        """The geometry of a sequence of `tokens`: the video's, or for a joint sequence the video's with
        its text tokens before or after; None where the sequence is neither."""
        video = self.video
        if video is None:
            return None
        count = video[0] * video[1] * video[2]
        if count == tokens:
            return video
        if self.text is None or tokens <= count:
            return None
        text = tokens - count
        return video + ((text, 0) if self.text == "before" else (0, text))


def _patch_size(model: Any) -> tuple[int, int, int] | None:
    config = getattr(model, "config", None)
    patch = getattr(config, "patch_size", None)
    if patch is None:
        return None
    if isinstance(patch, int):
        return (int(getattr(config, "patch_size_t", None) or 1), patch, patch)
    patch = tuple(int(p) for p in patch)
    return patch if len(patch) == 3 else None


def _latent_sizes(layout: str, args: tuple, kwargs: dict) -> tuple[Any, Any, Any] | None:
    """(frames, height, width) of a forward's latent before patching, or None where it has none."""
    if layout == "packed":
        sizes = tuple(kwargs.get(name) for name in ("num_frames", "height", "width"))
        return sizes if all(isinstance(x, int) or hasattr(x, "__index__") for x in sizes) else None
    hidden = kwargs.get("hidden_states", args[0] if args else None)
    shape = tuple(getattr(hidden, "shape", ()))
    if len(shape) != 5:
        return None
    return (shape[1], shape[3], shape[4]) if layout == "BFCHW" else (shape[2], shape[3], shape[4])


def _record_geometry(model: Any, state: _ModelState) -> Any:
    """A forward pre-hook that records the latent geometry of each forward of a video transformer."""
    patch = _patch_size(model)
    layout = _LAYOUT.get(type(model).__name__, "BCFHW")

    def hook(_module, args, kwargs):
        state.video = None
        sizes = _latent_sizes(layout, args, kwargs)
        if patch is None or sizes is None:
            return None
        frames, height, width = sizes
        if frames % patch[0] or height % patch[1] or width % patch[2]:
            return None
        state.video = (frames // patch[0], height // patch[1], width // patch[2])
        return None

    return model.register_forward_pre_hook(hook, with_kwargs=True)


def role_of(module: Any, name: str = "") -> tuple[str, str | None]:
    """(role, category) of a diffusers attention module named `name` in its model. A module without an
    `is_cross_attention` flag (LTX's, LTX-2's) is cross-attention where diffusers' blocks name it so:
    `attn2` (`audio_attn2`), or `<a>_to_<b>_attn` for attention from one stream to another (LTX-2's
    audio-to-video and video-to-audio)."""
    cross = getattr(module, "is_cross_attention", None)
    if cross is None:
        leaf = name.rsplit(".", 1)[-1]
        cross = leaf.endswith("attn2") or ("_to_" in leaf and leaf.endswith("attn"))
    if cross:
        return "cross", None
    if getattr(module, "added_kv_proj_dim", None) is not None:
        return "joint", "self"
    if "token_refiner" in name.split("."):
        return "text", None  # self-attention over the prompt alone (HunyuanVideo's token refiner)
    return "self", None


def _head_size(module: Any) -> int:
    head_dim = getattr(module, "head_dim", None)
    if head_dim:
        return int(head_dim)
    return int(module.inner_dim // module.heads)


def _attention_modules(model: Any) -> list[tuple[str, Any]]:
    return [(name, m) for name, m in model.named_modules() if hasattr(m, "processor") and hasattr(m, "set_processor")]


def _mask_for_diffattn(mask: Any) -> Any:
    """diffusers' masks as diffattn takes them: boolean keep-masks, [B, 1, 1, Skv] as [B, Skv]; additive
    float masks of 0 and -10000 (or -inf) as the keep-masks they stand for (the custom op
    keep_mask_from_additive, which checks their values where it runs, compiled or not)."""
    if mask is None:
        return None
    if mask.dtype.is_floating_point:
        mask = torch.ops.diffattn.keep_mask_from_additive(mask)
    if mask.dim() == 4 and mask.shape[1] == 1 and mask.shape[2] == 1:
        return mask[:, 0, 0, :]
    return mask


def _route_call(route: Route, query, key, value, attn_mask, dropout_p, is_causal, scale, parallel_config):
    """One attention call of a routed processor (q, k, v in [B, S, H, D])."""
    if dropout_p:
        raise errors.InvalidInputError(
            f"diffattn runs inference attention; dropout_p={dropout_p} asks for training dropout (call model.eval())",
            "invalid_input",
        )
    if parallel_config is not None and getattr(parallel_config, "context_parallel_config", None) is not None:
        raise errors.UnsupportedError(
            "diffusers' context parallelism is not routed through diffattn yet; call diffattn.diffusers.remove "
            "on this model or disable context parallelism",
            "unsupported",
        )
    mask = _mask_for_diffattn(attn_mask)
    state = getattr(route, "state", None)
    video = state.for_tokens(query.shape[1]) if state is not None and query.shape[1] == key.shape[1] else None
    if torch.compiler.is_compiling():
        # The step (set_step) is read by the op when it runs (torch_ops._step_of): not traced, so a
        # compiled model is not recompiled for each step.
        if video is not None:
            return torch_ops.call(route.key, query, key, value, mask, None, None, False, scale, bool(is_causal),
                                  video=video)
        return torch.ops.diffattn.attention(query, key, value, mask, route.key, scale, bool(is_causal))
    step = state.step if state is not None else None
    num_steps = state.num_steps if step is not None else 0
    # Eagerly, the same call without the dispatcher's per-call cost; a padding mask given as the outer
    # product of query and key padding runs as key padding, its padded query rows filled in after.
    query_keep, first_key = None, False
    outer = _outer_as_key_padding(mask)
    if outer is not None:
        mask, query_keep, first_key = outer
    out = route.layer_for(query, key, scale, bool(is_causal))(query, key, value, mask, video=video, step=step,
                                                              num_steps=num_steps)
    if query_keep is not None:
        # A padded query row keeps no key (zeros), or key 0 alone (its value, with weight 1).
        fill = value[:, :1].repeat_interleave(query.shape[2] // value.shape[2], dim=2) if first_key else 0
        out = torch.where(query_keep[:, :, None, None], out, fill)
    return out


def _outer_as_key_padding(mask: Any) -> tuple[Any, Any, bool] | None:
    """A boolean [B, 1|H, Sq, Skv] mask that keeps key j for query i exactly where query i and key j are
    both kept, the same in every head (HunyuanVideo-1.5 builds its prompt padding so), or that and key 0
    for every query (HunyuanVideo's token refiner), as (key-padding mask [B, Skv], or None where it keeps
    every key; query keep [B, Sq], or None where it keeps every query; whether padded query rows keep
    key 0). Dense masks take slower paths than key padding, and some backends (SAGE_ATTN on CUDA, the
    sparse ones) refuse them. None for any other mask; eager calls only (the check reads the mask: one
    device synchronisation)."""
    if mask is None or mask.dtype != torch.bool or mask.dim() != 4 or mask.shape[2] == 1:
        return None
    rows = mask[:, 0]
    queries = rows[:, :, 1:].any(dim=2) if rows.shape[2] > 1 else rows.any(dim=2)
    keys = rows.any(dim=1)
    outer = queries[:, :, None] & keys[:, None, :]
    first = outer.clone()
    first[:, :, 0] = True
    is_outer, is_first, every_key, every_query = torch.stack(
        [(mask == outer[:, None]).all(), (mask == first[:, None]).all(), keys.all(), queries.all()]).tolist()
    if not (is_outer or is_first):
        return None
    first_key = bool(is_first and not is_outer)
    return (None if every_key else keys), (None if every_query else queries), first_key


# The routes of the SDPA-calling processors' calls in progress, innermost last (see _SdpaRouted).
_active_routes: list[Route] = []


def _routed_sdpa(original: Any) -> Any:
    """torch's scaled_dot_product_attention ([B, H, S, D]) for the module namespace of processors that
    call it: inside a routed processor's call (a route is active) the call goes to diffattn, in its
    [B, S, H, D] layout by transposed views; anywhere else it is torch's own."""

    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                     enable_gqa=False):
        if not _active_routes:
            if enable_gqa:
                return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                                scale=scale, enable_gqa=enable_gqa)
            return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                            scale=scale)
        out = _route_call(_active_routes[-1], query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                          attn_mask, dropout_p, is_causal, scale, None)
        return out.transpose(1, 2)

    setattr(scaled_dot_product_attention, _WRAPPED_MARK, original)
    return scaled_dot_product_attention


def _wrap_functional(namespace: dict[str, Any]) -> bool:
    """Gives a module whose processors call `F.scaled_dot_product_attention` an `F` of its own that
    routes those calls (once); False where the module has no such `F`."""
    functional = namespace.get("F")
    if functional is torch.nn.functional:
        proxy = types.ModuleType("torch.nn.functional")
        proxy.__dict__.update(functional.__dict__)
        proxy.scaled_dot_product_attention = _routed_sdpa(functional.scaled_dot_product_attention)
        namespace["F"] = proxy
        return True
    return getattr(getattr(functional, "scaled_dot_product_attention", None), _WRAPPED_MARK, None) is not None


class _SdpaRouted:
    """A copy of a processor that calls torch's SDPA, with its role's route active during its calls.
    Subclassed per processor class (_sdpa_routed) so that its __call__ shows the processor's
    signature, from which diffusers' Attention picks the keyword arguments it passes."""

    def __init__(self, processor: Any, route: Route) -> None:
        self.processor = processor
        self._attention_backend = route

    def __getattr__(self, name: str) -> Any:
        processor = self.__dict__.get("processor")  # absent while copy or pickle rebuilds the object
        if processor is None:
            raise AttributeError(name)
        return getattr(processor, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _active_routes.append(self._attention_backend)
        try:
            return self.processor(*args, **kwargs)
        finally:
            _active_routes.pop()


_sdpa_routed_classes: dict[type, type] = {}


def _sdpa_routed(processor: Any, route: Route) -> _SdpaRouted:
    cls = type(processor)
    routed = _sdpa_routed_classes.get(cls)
    if routed is None:
        def __call__(self, *args, **kwargs):
            return _SdpaRouted.__call__(self, *args, **kwargs)

        __call__.__signature__ = inspect.signature(cls.__call__)
        routed = type(f"Diffattn{cls.__name__}", (_SdpaRouted,), {"__call__": __call__})
        _sdpa_routed_classes[cls] = routed
    return routed(processor, route)


def _wrap_dispatch(namespace: dict[str, Any]) -> None:
    """Wraps `dispatch_attention_fn` in a processor's module once: Routes go to diffattn."""
    original = namespace.get("dispatch_attention_fn")
    if original is None:
        raise errors.UnsupportedError(
            f"the attention processors of {namespace.get('__name__')} call neither dispatch_attention_fn nor "
            "torch's F.scaled_dot_product_attention, so diffattn cannot route them; use diffusers' attention for "
            "this model",
            "unsupported",
        )
    if getattr(original, _WRAPPED_MARK, None) is not None:
        return

    def dispatch_attention_fn(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                              enable_gqa=False, attention_kwargs=None, *, backend=None, parallel_config=None):
        if isinstance(backend, Route):
            return _route_call(backend, query, key, value, attn_mask, dropout_p, is_causal, scale, parallel_config)
        return original(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, attention_kwargs,
                        backend=backend, parallel_config=parallel_config)

    setattr(dispatch_attention_fn, _WRAPPED_MARK, original)
    namespace["dispatch_attention_fn"] = dispatch_attention_fn


def apply(
    model: Any,
    config: ConfigLike = None,
    platform: PlatformLike = None,
    *,
    roles: list[str] | None = None,
    session: Session | None = None,
) -> dict[str, Resolution]:
    """Routes `model`'s attention modules through diffattn; returns the resolution of each role.

    roles: only these roles are routed (others keep diffusers' attention); None routes every role.
    An explicit backend that cannot run here raises at once (never a silent swap).
    """
    if session is None:
        session = Session(config=config, platform=platform)
    resolutions: dict[str, Resolution] = {}
    modules = _attention_modules(model)
    if not modules:
        raise errors.InvalidInputError(
            f"{type(model).__name__} has no diffusers attention modules (with a processor) to route", "invalid_input"
        )
    state = getattr(model, "_diffattn_state", None) or _ModelState(_JOINT_TEXT.get(type(model).__name__))
    for name, module in modules:
        role, category = role_of(module, name)
        if roles is not None and role not in roles:
            continue
        if role not in resolutions:
            resolutions[role] = session.resolve(role, _head_size(module), category)  # logs once per role
        processor = getattr(module, _ORIGINAL_PROCESSOR, None) or module.processor
        route = session.route(role, category)
        route.state = state
        namespace = type(processor).__call__.__globals__
        if "dispatch_attention_fn" not in namespace and _wrap_functional(namespace):
            routed = _sdpa_routed(processor, route)
        else:
            routed = copy.copy(processor)
            routed._attention_backend = route
            _wrap_dispatch(namespace)
        setattr(module, _ORIGINAL_PROCESSOR, processor)
        module.processor = routed
    model._diffattn_session = session  # the routes live as long as the model uses them
    model._diffattn_state = state
    if getattr(model, _GEOMETRY_HOOK, None) is None and _patch_size(model) is not None and hasattr(
            model, "register_forward_pre_hook"):
        setattr(model, _GEOMETRY_HOOK, _record_geometry(model, state))
    return resolutions


def set_step(model: Any, step: int | None, num_steps: int = 0) -> None:
    """The denoising step that the attention calls of `model` (routed by `apply`) carry from now on:
    what an attention schedule picks its profile by, and RAINFUSION_ATTN's start_step / end_step
    window reads (`num_steps`: the generation's steps, 0 if not known). None: the calls carry none
    (a scheduled session then refuses them)."""
    state = getattr(model, "_diffattn_state", None)
    if state is None:
        raise errors.UsageError("set_step needs a model routed by diffattn.diffusers.apply first", "invalid_input")
    if step is not None and (int(step) < 0 or int(num_steps) < 0 or (num_steps and int(step) >= int(num_steps))):
        raise errors.UsageError(f"set_step: step {step} is not a step of a {num_steps}-step generation "
                                "(steps count from 0; num_steps 0 means not known)", "invalid_input")
    state.step = None if step is None else int(step)
    state.num_steps = int(num_steps) if step is not None else 0


def step_callback(*models: Any) -> Any:
    """A `callback_on_step_end` for a diffusers pipeline whose transformers are `models` (Wan2.2-A14B's
    pipeline has two): their calls carry step 0 from now on, and after step i ends, step i + 1 (with
    the pipeline's step count); after the last step, 0 again for the next generation.

        pipe(prompt, ..., callback_on_step_end=diffattn.diffusers.step_callback(pipe.transformer))
    """
    if not models:
        raise errors.UsageError("step_callback takes the pipeline's routed transformers, e.g. pipe.transformer",
                                "invalid_input")
    for model in models:
        set_step(model, 0)

    def callback(pipe: Any, i: int, _t: Any, callback_kwargs: dict[str, Any]) -> dict[str, Any]:
        num_steps = int(getattr(pipe, "num_timesteps", 0) or 0)
        following = int(i) + 1
        for model in models:
            set_step(model, 0 if num_steps and following >= num_steps else following, num_steps)
        return {}

    return callback


def remove(model: Any) -> None:
    """Gives `model`'s attention back to diffusers (the processors it had before apply)."""
    for _name, module in _attention_modules(model):
        original = getattr(module, _ORIGINAL_PROCESSOR, None)
        if original is not None:
            module.processor = original
            delattr(module, _ORIGINAL_PROCESSOR)
    if hasattr(model, "_diffattn_session"):
        del model._diffattn_session
    hook = getattr(model, _GEOMETRY_HOOK, None)
    if hook is not None:
        hook.remove()
        delattr(model, _GEOMETRY_HOOK)
    if hasattr(model, "_diffattn_state"):
        del model._diffattn_state
