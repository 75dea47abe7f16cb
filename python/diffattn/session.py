"""A platform and a configuration, and what they resolve to per role (the C interface's session)."""

from __future__ import annotations

import ctypes
import dataclasses
import json
import threading
import warnings
from typing import Any, Mapping, Union

from . import _native
from .config import AttentionConfig, AttentionSpec, ConfigLike


class TunedElsewhereWarning(UserWarning):
    """A configuration written by `diffattn tune` on another platform: its choices may not be the fastest here."""


@dataclasses.dataclass(frozen=True)
class Considered:
    backend: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Resolution:
    """Which backend a role gets, the spec it received (None for a platform default) and why."""

    role: str
    category: str | None
    head_size: int
    backend: str
    source: str  # per_role, category, default, env or platform
    spec: AttentionSpec | None
    considered: tuple[Considered, ...]

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Resolution:
        spec = value.get("spec")
        return cls(
            role=value["role"],
            category=value.get("category"),
            head_size=value["head_size"],
            backend=value["backend"],
            source=value["source"],
            spec=None if spec is None else AttentionSpec.from_dict(spec),
            considered=tuple(Considered(c["backend"], c["reason"]) for c in value.get("considered", [])),
        )


@dataclasses.dataclass(frozen=True)
class Platform:
    """A platform as the core sees it: probed (`Platform.probe()`) or described (`Platform.describe`)."""

    spec: str  # what the session is created from: "", "cpu", "cuda", a file path or JSON text
    info: dict[str, Any]
    description: str

    @property
    def kind(self) -> str:
        return self.info["kind"]

    @classmethod
    def probe(cls, kind: str | None = None) -> Platform:
        """This machine: "cpu", "cuda", or None for CUDA when a device answers, else CPU."""
        return Session(platform=kind or "").platform

    @classmethod
    def describe(cls, description: Mapping[str, Any] | str) -> Platform:
        """A platform described instead of probed: a dict (docs/design/architecture.md's form) or a
        path to a JSON file, for planning and tests on a machine without the hardware."""
        return Session(platform=description).platform


PlatformLike = Union[Platform, Mapping[str, Any], str, None]


def _platform_spec(platform: PlatformLike) -> str:
    if platform is None:
        return ""
    if isinstance(platform, Platform):
        return platform.spec
    if isinstance(platform, Mapping):
        return json.dumps(dict(platform))
    return str(platform)


class Session:
    """A platform and an attention configuration; resolves roles and creates layers.

    The environment's DIFFUSION_ATTENTION_BACKEND fills the default when the configuration sets none,
    as on the command line. Each session logs a role's resolution once (per role and source).
    """

    def __init__(
        self, config: ConfigLike = None, platform: PlatformLike = None, schedule: Mapping[str, Any] | str | None = None
    ) -> None:
        """`schedule`: an attention schedule (the --diffusion-attention-schedule object, as a mapping or
        JSON text), checked by the library's rules; the session's layers then take `step=` per call."""
        config = AttentionConfig.normalise(config)
        config_json = config.to_json()
        self._platform_spec = _platform_spec(platform)
        handle = ctypes.c_void_p()
        _native.raise_for(
            _native.lib.diffattn_session_create(
                self._platform_spec.encode(), config_json.encode(), ctypes.byref(handle)
            )
        )
        self._handle = handle
        if schedule is not None:
            text = schedule if isinstance(schedule, str) else json.dumps(schedule)
            _native.raise_for(_native.lib.diffattn_session_set_schedule(self._handle, text.encode()))
        if config.source_file:
            self._warn_if_tuned_elsewhere(config.source_file)
        self._lock = threading.Lock()
        self._layers: dict[tuple, Any] = {}
        self._routes: dict[tuple, Any] = {}

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            _native.lib.diffattn_session_destroy(handle)
            self._handle = None

    def _warn_if_tuned_elsewhere(self, config_file: str) -> None:
        out = ctypes.c_void_p()
        _native.raise_for(
            _native.lib.diffattn_session_tuning_warning(self._handle, config_file.encode(), ctypes.byref(out))
        )
        message = _native.take_string(out)
        if message:
            warnings.warn(TunedElsewhereWarning(message), stacklevel=3)

    @property
    def handle(self) -> ctypes.c_void_p:
        return self._handle

    @property
    def config(self) -> AttentionConfig:
        """The configuration as it resolves, the environment's default included."""
        return AttentionConfig.from_json(
            json.dumps(_native.call_json(_native.lib.diffattn_session_config, self._handle))
        )

    @property
    def platform(self) -> Platform:
        info = ctypes.c_void_p()
        description = ctypes.c_void_p()
        _native.raise_for(
            _native.lib.diffattn_session_platform(self._handle, ctypes.byref(info), ctypes.byref(description))
        )
        info_json = json.loads(_native.take_string(info))
        text = _native.take_string(description)
        return Platform(spec=self._platform_spec, info=info_json, description=text)

    def resolve(
        self, role: str, head_size: int, category: str | None = None, allow_trtllm_default: bool = False
    ) -> Resolution:
        """The backend `role` gets for this head size: backend, spec and source."""
        value = _native.call_json(
            _native.lib.diffattn_resolve,
            self._handle,
            role.encode(),
            _native.encode(category),
            int(head_size),
            int(bool(allow_trtllm_default)),
        )
        return Resolution.from_json(value)

    def load_plugin(self, path: str) -> list[str]:
        """Loads a plugin library (include/diffattn/plugin.h); returns the backend names it added."""
        return _native.call_json(_native.lib.diffattn_session_load_plugin, self._handle, str(path).encode())

    def layer(self, num_heads: int, head_size: int, **kwargs: Any) -> Any:
        """An Attention layer of this session (see diffattn.Attention for the arguments)."""
        from .layer import Attention

        return Attention(num_heads, head_size, session=self, **kwargs)

    def route(self, role: str, category: str | None = None) -> Any:
        """The call target for `role` in this session (see diffattn.targets.Route)."""
        route = self._routes.get((role, category))
        if route is not None:
            return route
        from .targets import Route

        with self._lock:
            route = self._routes.get((role, category))
            if route is None:
                route = Route(self, role, category)
                self._routes[(role, category)] = route
        return route

    def cached_layer(
        self,
        num_heads: int,
        num_kv_heads: int,
        head_size: int,
        role: str,
        category: str | None,
        scale: float | None,
        causal: bool,
    ) -> Any:
        """One layer per distinct declaration, created on first use (for functional calls)."""
        key = (num_heads, num_kv_heads, head_size, role, category, scale, causal)
        layer = self._layers.get(key)
        if layer is None:
            with self._lock:
                layer = self._layers.get(key)
                if layer is None:
                    layer = self.layer(
                        num_heads, head_size, num_kv_heads=num_kv_heads, role=role, category=category,
                        scale=scale, causal=causal,
                    )
                    self._layers[key] = layer
        return layer
