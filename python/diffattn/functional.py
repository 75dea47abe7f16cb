"""The functional call: attention(q, k, v, ...) with the layer for the call's shapes made on first use."""

from __future__ import annotations

import json
import threading
from typing import Any

from . import _tensors
from .config import ConfigLike
from .session import PlatformLike, Session

_default_sessions: dict[tuple[str, str], Session] = {}
_sessions_lock = threading.Lock()


def _config_key(config: ConfigLike) -> str:
    """A cache key for a configuration as given (the core normalises it once, when the session is made)."""
    if config is None or isinstance(config, str):
        return config or ""
    if hasattr(config, "to_json"):
        return config.to_json()
    return json.dumps(config, sort_keys=True, default=lambda value: value.to_dict())


def _session_for(config: ConfigLike, platform: PlatformLike) -> Session:
    """One session per (configuration, platform) for functional calls, so each role logs once."""
    from .session import _platform_spec

    key = (_config_key(config), _platform_spec(platform))
    session = _default_sessions.get(key)
    if session is not None:
        return session
    with _sessions_lock:
        session = _default_sessions.get(key)
        if session is None:
            session = Session(config=config, platform=platform)
            _default_sessions[key] = session
    return session


def attention(
    q: Any,
    k: Any,
    v: Any,
    mask: Any = None,
    scale: float | None = None,
    causal: bool = False,
    return_lse: bool = False,
    out: Any = None,
    *,
    role: str = "self",
    category: str | None = None,
    config: ConfigLike = None,
    platform: PlatformLike = None,
    session: Session | None = None,
) -> Any:
    """Attention on DLPack tensors in DiT layout with the backend `role` resolves to.

    The layer for these shapes is created on first use and kept by the session (by default one
    per configuration and platform, probed, with DIFFUSION_ATTENTION_BACKEND as on the CLI).
    """
    if session is None:
        session = _session_for(config, platform)
    route = session.route(role, category)
    if _tensors.torch_compiling(q):
        from . import torch_ops

        return torch_ops.call(route.key, q, k, v, mask, out, None, return_lse, scale, causal)
    return route.layer_for(q, k, scale, causal)(q, k, v, mask, out=out, return_lse=return_lse)
