"""The sparse video backends from Python: a call carries its latent video geometry (video=), the
model's layer index (layer_index=) and FASTVIDEO_VSA's gate (gate=); without the geometry the call is
refused and nothing is written."""

from __future__ import annotations

import numpy as np
import pytest

import diffattn
from conftest import random_qkv, reference_attention
from diffattn.errors import CannotRunHereError, InvalidInputError, UsageError


def _layer(spec: dict, heads: int = 2, head_size: int = 64):
    session = diffattn.Session(config={"per_role": {"self": spec}}, platform="cpu")
    return session.layer(num_heads=heads, head_size=head_size)


def test_fastvideo_vsa_with_every_cube_is_dense_and_needs_the_geometry(rng):
    frames, height, width = int(rng.integers(2, 5)), int(rng.integers(3, 7)), int(rng.integers(3, 9))
    tokens = frames * height * width
    q, k, v = random_qkv(rng, 1, tokens, tokens, 2, 2, 64)
    cubes = -(-frames // 4) * -(-height // 4) * -(-width // 4)
    layer = _layer({"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": cubes})
    out = np.full_like(q, np.nan)
    with pytest.raises(CannotRunHereError, match="video geometry"):
        layer(q, k, v, out=out)
    assert np.isnan(out).all()
    np.testing.assert_allclose(layer(q, k, v, video=(frames, height, width)), reference_attention(q, k, v)[0],
                               rtol=1e-4, atol=1e-5)


def test_a_gate_adds_the_coarse_branch(rng):
    q, k, v = random_qkv(rng, 1, 4 * 4 * 8, 4 * 4 * 8, 2, 2, 64)
    gate = rng.uniform(0.5, 1.5, size=q.shape).astype(np.float32)
    layer = _layer({"backend": "FASTVIDEO_VSA", "fastvideo_vsa_topk": 2})
    plain = layer(q, k, v, video=(4, 4, 8))
    gated = layer(q, k, v, video=(4, 4, 8), gate=gate)
    assert np.isfinite(gated).all()
    assert np.abs(gated - plain).max() > 1e-3  # the gated coarse branch is added


def test_rainfusion_skips_the_layers_it_is_told_to_by_index(rng):
    frames, height, width = 3, 8, 16
    tokens = frames * height * width
    q, k, v = random_qkv(rng, 1, tokens, tokens, 2, 2, 64)
    layer = _layer({"backend": "RAINFUSION_ATTN", "block_sparse": {"sparsity": 0.6, "skip_layers": "3"}})
    dense = reference_attention(q, k, v)[0]
    np.testing.assert_allclose(layer(q, k, v, video=(frames, height, width), layer_index=3), dense, rtol=1e-4,
                               atol=1e-5)
    sparse = layer(q, k, v, video=(frames, height, width), layer_index=4)
    assert np.abs(sparse - dense).max() > 1e-3


def test_bad_geometries_are_refused(rng):
    q, k, v = random_qkv(rng, 1, 24, 24, 2, 2, 64)
    layer = _layer({"backend": "FASTVIDEO_VSA"})
    with pytest.raises(UsageError, match=r"video= takes \(frames, height, width\)"):
        layer(q, k, v, video=(2, 12))
    with pytest.raises(InvalidInputError, match="positive frames, height and width"):
        layer(q, k, v, video=(2, 0, 12))
    with pytest.raises(InvalidInputError):
        layer(q, k, v, video=(2, 3, 5))  # 30 tokens for a call of 24
