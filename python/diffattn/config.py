"""Typed attention configuration: AttentionConfig{default, per_role} of AttentionSpec values and the
typed blocks backends own.

These classes hold values; they do not check them. Constructing an AttentionSpec or AttentionConfig
sends it through the C++ core (`diffattn_spec_normalise` / `diffattn_config_normalise`), which applies
every rule (types, ranges, mutual exclusions, block ownership) with the same messages as the CLI and
fills in the defaults it owns; the object then holds the normalised values. A typed block alone is
checked when it is placed in a spec, because its rules depend on the backend that owns it.
A field left as None means "not given": the core's default applies.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping, Union

from . import _native, errors


def _without_none(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


@dataclasses.dataclass
class AttnQuantSpec:
    """`quant`: FLASHINFER_ATTN and TRTLLM_ATTN (each validates its own value set)."""

    dtype_qk: str | None = None
    dtype_vo: str | None = None
    q_block_size: int | None = None
    k_block_size: int | None = None
    flashinfer_backend: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _without_none(dataclasses.asdict(self))


@dataclasses.dataclass
class SkipSoftmaxSpec:
    """`skip_softmax`: TRTLLM_ATTN. target_sparsity and threshold are mutually exclusive."""

    target_sparsity: float | None = None
    threshold: float | None = None
    disabled_until_timestep: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return _without_none(dataclasses.asdict(self))


@dataclasses.dataclass
class BlockSparseSpec:
    """`block_sparse`: block-sparse backends such as RAINFUSION_ATTN (defaults filled by the core)."""

    sparsity: float | None = None
    start_step: int | None = None
    end_step: int | None = None
    precision: str | None = None
    skip_layers: str | list[int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return _without_none(dataclasses.asdict(self))


_BLOCKS = {"quant": AttnQuantSpec, "skip_softmax": SkipSoftmaxSpec, "block_sparse": BlockSparseSpec}
BlockLike = Union[AttnQuantSpec, SkipSoftmaxSpec, BlockSparseSpec, Mapping[str, Any], None]


def _block_to_dict(value: Any) -> Any:
    """A typed block as the core reads it; anything else (a dict, a wrong type) goes as given, so the
    core reports it."""
    return value.to_dict() if hasattr(value, "to_dict") else value


def _block_from_dict(name: str, value: Any) -> Any:
    return None if value is None else _BLOCKS[name](**value)


@dataclasses.dataclass
class AttentionSpec:
    """One backend choice with its typed options, validated and normalised by the core on construction."""

    backend: str
    quant: AttnQuantSpec | None = None
    skip_softmax: SkipSoftmaxSpec | None = None
    block_sparse: BlockSparseSpec | None = None
    fastvideo_vsa_topk: int | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        normalised = _native.call_json(
            _native.lib.diffattn_spec_normalise, json.dumps(self._raw()).encode(), b"spec"
        )
        if normalised is None:
            raise errors.InvalidConfigError(
                "AttentionSpec(backend='auto') has no backend; leave the entry out (or use None) for the "
                "platform default",
                "invalid_config",
            )
        self._assign(normalised)

    def _raw(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"backend": self.backend}
        for name in _BLOCKS:
            if getattr(self, name) is not None:
                raw[name] = _block_to_dict(getattr(self, name))
        if self.fastvideo_vsa_topk is not None:
            raw["fastvideo_vsa_topk"] = self.fastvideo_vsa_topk
        if self.extra:
            raw["extra"] = self.extra
        return raw

    def _assign(self, normalised: Mapping[str, Any]) -> None:
        self.backend = normalised["backend"]
        for name in _BLOCKS:
            setattr(self, name, _block_from_dict(name, normalised.get(name)))
        self.fastvideo_vsa_topk = normalised.get("fastvideo_vsa_topk")
        self.extra = dict(normalised.get("extra", {}))

    @classmethod
    def from_dict(cls, value: Mapping[str, Any] | str) -> AttentionSpec:
        """A spec from a plain dict or a backend name, as the JSON configuration spells it."""
        if isinstance(value, str):
            return cls(backend=value)
        if not isinstance(value, Mapping):
            raise errors.InvalidConfigError(
                f"an AttentionSpec is a backend name or a dict, not {type(value).__name__}", "invalid_config"
            )
        normalised = _native.call_json(_native.lib.diffattn_spec_normalise, json.dumps(dict(value)).encode(), b"spec")
        if normalised is None:
            raise errors.InvalidConfigError("'auto' is no AttentionSpec; leave the entry out", "invalid_config")
        spec = cls.__new__(cls)
        spec._assign(normalised)
        return spec

    def to_dict(self) -> dict[str, Any]:
        return self._raw()


SpecLike = Union[AttentionSpec, Mapping[str, Any], str, None]


def _spec_to_raw(value: Any) -> Any:
    return value.to_dict() if isinstance(value, AttentionSpec) else value


@dataclasses.dataclass
class AttentionConfig:
    """`{"default": spec, "per_role": {role: spec}}`, as --diffusion-attention-config takes it.

    Entries may be AttentionSpec objects, plain dicts or backend names; nested per_role maps flatten
    to dotted roles; "auto" entries are dropped. The core validates and normalises on construction.
    """

    default: AttentionSpec | None = None
    per_role: dict[str, AttentionSpec] = dataclasses.field(default_factory=dict)
    source_file: str | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        per_role = self.per_role if self.per_role is not None else {}
        if not isinstance(per_role, Mapping):
            raise errors.InvalidConfigError(
                f"per_role is a dict of role -> spec, not {type(per_role).__name__}", "invalid_config"
            )
        raw = {"default": _spec_to_raw(self.default), "per_role": {k: _spec_to_raw(v) for k, v in per_role.items()}}
        self._assign(_native.call_json(_native.lib.diffattn_config_normalise, json.dumps(raw).encode()))

    def _assign(self, normalised: Mapping[str, Any]) -> None:
        default = normalised.get("default")
        self.default = None if default is None else AttentionSpec.from_dict(default)
        self.per_role = {role: AttentionSpec.from_dict(spec) for role, spec in normalised.get("per_role", {}).items()}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> AttentionConfig:
        """A configuration from a plain dict (unknown keys are the core's errors, as on the CLI)."""
        if not isinstance(value, Mapping):
            raise errors.InvalidConfigError(
                f"an AttentionConfig is a dict, not {type(value).__name__}", "invalid_config"
            )
        return cls.from_json(json.dumps(dict(value)))

    @classmethod
    def from_json(cls, text: str) -> AttentionConfig:
        config = cls.__new__(cls)
        config.source_file = None
        config._assign(_native.call_json(_native.lib.diffattn_config_normalise, text.encode()))
        return config

    @classmethod
    def from_file(cls, path: str | Path) -> AttentionConfig:
        """A configuration from a JSON file (what `--diffusion-attention-config @file.json` reads)."""
        file = Path(str(path).removeprefix("@"))
        config = cls.from_json(file.read_text(encoding="utf-8"))
        config.source_file = str(file)  # a Session warns when the file was tuned on another platform
        return config

    @classmethod
    def normalise(cls, value: ConfigLike) -> AttentionConfig:
        """None, a dict, JSON text, '@file.json' or an AttentionConfig, as an AttentionConfig."""
        if value is None:
            return cls()
        if isinstance(value, AttentionConfig):
            return value
        if isinstance(value, str):
            return cls.from_file(value) if value.startswith("@") else cls.from_json(value)
        return cls.from_dict(value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "default": None if self.default is None else self.default.to_dict(),
            "per_role": {role: spec.to_dict() for role, spec in self.per_role.items()},
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


ConfigLike = Union[AttentionConfig, Mapping[str, Any], str, None]
