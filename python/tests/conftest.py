"""Shared helpers: fresh random inputs (seed printed for replay) and a float64 reference attention."""

from __future__ import annotations

import secrets

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    seed = secrets.randbits(32)
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def reference_attention(q, k, v, mask=None, scale=None, causal=False):
    """float64 attention in DiT layout; returns (out [B,Sq,H,Dv], lse [B,H,Sq]). mask: bool keep-mask
    [B,Skv] or [B|1,H|1,Sq,Skv]; causal is top-left aligned."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    heads, kv_heads = q.shape[2], k.shape[2]
    k = np.repeat(k, heads // kv_heads, axis=2)
    v = np.repeat(v, heads // kv_heads, axis=2)
    scale = q.shape[3] ** -0.5 if scale is None else scale
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
    keep = np.ones(scores.shape, dtype=bool)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        keep &= mask[:, None, None, :] if mask.ndim == 2 else mask
    if causal:
        keep &= np.tril(np.ones(scores.shape[-2:], dtype=bool))
    scores = np.where(keep, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - top)
    total = weights.sum(axis=-1, keepdims=True)
    out = np.einsum("bhqk,bkhd->bqhd", weights / total, v)
    lse = (np.log(total) + top)[..., 0]
    return out, lse


def random_qkv(rng, batch, sq, skv, heads, kv_heads, dim, dtype=np.float32):
    def draw(*shape):
        return rng.uniform(-2.0, 2.0, size=shape).astype(dtype)

    return draw(batch, sq, heads, dim), draw(batch, skv, kv_heads, dim), draw(batch, skv, kv_heads, dim)


def cli_path() -> str | None:
    """The diffattn tool: DIFFATTN_CLI, or the one installed with the package; None when neither is there."""
    from diffattn import UnavailableError
    from diffattn.tune import cli_path as find

    try:
        return find()
    except UnavailableError:
        return None
