"""Call targets by key: layers and routes, so that custom ops, whose arguments are tensors and plain
values, can name one. A target stays registered while it lives."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .layer import Attention
    from .session import Session

_targets_lock = threading.Lock()
_targets: dict[int, Any] = {}
_next_key = [1]


def register_target(target: Any) -> int:
    with _targets_lock:
        key = _next_key[0]
        _next_key[0] += 1
        _targets[key] = weakref.ref(target, lambda _ref, key=key: _targets.pop(key, None))
    return key


def target_by_key(key: int) -> Any:
    ref = _targets.get(key)
    target = ref() if ref is not None else None
    if target is None:
        from .errors import InvalidInputError

        raise InvalidInputError(
            f"no diffattn layer or route with key {key} is alive; keep the Attention object (or the session)",
            "invalid_input",
        )
    return target


class Route:
    """A session's role whose layer is chosen per call by the shapes (heads, head size), scale and
    causality: the target of functional calls and of the diffusers integration."""

    def __init__(self, session: Session, role: str, category: str | None) -> None:
        self.session = session
        self.role = role
        self.category = category
        self.key = register_target(self)

    def layer_for(self, q: Any, k: Any, scale: float | None, causal: bool) -> Attention:
        q_shape, k_shape = tuple(q.shape), tuple(k.shape)
        # Shapes of the wrong rank make a layer the core refuses, with its message about the layer.
        heads = q_shape[2] if len(q_shape) == 4 else 0
        kv_heads = k_shape[2] if len(k_shape) == 4 else 0
        head_size = q_shape[3] if len(q_shape) == 4 else 0
        return self.session.cached_layer(heads, kv_heads, head_size, self.role, self.category, scale, causal)
