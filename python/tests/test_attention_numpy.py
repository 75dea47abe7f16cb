"""attention() and the Attention layer on NumPy arrays (CPU), against a float64 reference."""

from __future__ import annotations

import numpy as np
import pytest

import diffattn
from conftest import random_qkv, reference_attention

SDPA = {"default": {"backend": "TORCH_SDPA"}}


@pytest.mark.parametrize("causal", [False, True])
def test_gqa_masked_scaled_attention_and_lse_match_the_reference(rng, causal):
    batch, sq, skv, heads, kv_heads, dim = 2, int(rng.integers(5, 40)), int(rng.integers(5, 40)), 4, 2, 32
    q, k, v = random_qkv(rng, batch, sq, skv, heads, kv_heads, dim)
    mask = rng.random((batch, skv)) < 0.7
    mask[:, 0] = True  # no row without a key
    scale = float(rng.uniform(0.05, 0.4))
    out, lse = diffattn.attention(q, k, v, mask=mask, scale=scale, causal=causal, return_lse=True,
                                  config=SDPA, platform="cpu")
    want, want_lse = reference_attention(q, k, v, mask, scale, causal)
    assert out.shape == (batch, sq, heads, dim) and out.dtype == np.float32
    assert lse.shape == (batch, heads, sq) and lse.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-4, atol=1e-5)


def test_a_broadcast_four_dimensional_mask_and_strided_inputs(rng):
    batch, sq, skv, heads, dim = 1, 9, 13, 2, 16
    qkv = rng.uniform(-2, 2, size=(batch, sq, 3, heads, dim)).astype(np.float32)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # strided views of one packed array, no copies
    k, v = np.concatenate([k, k[:, :4]], axis=1), np.concatenate([v, v[:, :4]], axis=1)
    mask = rng.random((1, 1, sq, skv)) < 0.6
    mask[..., 0] = True
    out = diffattn.attention(q, k, v, mask=mask, config=SDPA, platform="cpu")
    np.testing.assert_allclose(out, reference_attention(q, k, v, mask)[0], rtol=1e-4, atol=1e-5)


def test_a_mask_that_repeats_one_row_through_zero_strides_runs_as_key_padding(rng):
    # [B, H, Sq, Skv] reading one row of keys per batch (what torch's expand gives): the same bits as
    # the [B, Skv] key-padding mask, so SAGE_ATTN, which refuses dense masks, takes it.
    batch, sq, skv, heads, dim = 2, 9, 13, 2, 64
    q, k, v = (rng.standard_normal((batch, s, heads, dim)).astype(np.float16) for s in (sq, skv, skv))
    keep = rng.random((batch, skv)) < 0.6
    keep[:, 0] = True
    repeated = np.lib.stride_tricks.as_strided(
        keep, shape=(batch, heads, sq, skv), strides=(keep.strides[0], 0, 0, keep.strides[1]), writeable=True)
    sage = {"default": {"backend": "SAGE_ATTN"}}
    out = diffattn.attention(q, k, v, mask=repeated, config=sage, platform="cpu")
    np.testing.assert_array_equal(out, diffattn.attention(q, k, v, mask=keep, config=sage, platform="cpu"))
    with pytest.raises(diffattn.UnsupportedError, match="dense masks"):
        diffattn.attention(q, k, v, mask=np.ascontiguousarray(repeated), config=sage, platform="cpu")


def test_a_layer_writes_into_a_preallocated_output(rng):
    q, k, v = random_qkv(rng, 1, 11, 7, 3, 3, 8)
    layer = diffattn.Attention(num_heads=3, head_size=8, role="cross", config=SDPA, platform="cpu")
    assert layer.backend == "TORCH_SDPA"
    out = np.full(q.shape, np.nan, dtype=np.float32)
    lse = np.full((1, 3, 11), np.nan, dtype=np.float32)
    got, got_lse = layer(q, k, v, out=out, lse=lse)
    assert got is out and got_lse is lse
    want, want_lse = reference_attention(q, k, v)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-4, atol=1e-5)


def test_bad_calls_raise_the_cores_message_and_leave_the_output_untouched(rng):
    q, k, v = random_qkv(rng, 1, 8, 8, 4, 4, 16)
    layer = diffattn.Attention(num_heads=4, head_size=16, config=SDPA, platform="cpu")
    out = rng.uniform(size=q.shape).astype(np.float32)
    before = out.copy()

    small = rng.uniform(size=(1, 7, 4, 16)).astype(np.float32)
    with pytest.raises(diffattn.InvalidInputError) as wrong_shape:
        layer(q, k, v, out=small)
    assert wrong_shape.value.exit_code == 2 and wrong_shape.value.code == "invalid_input"

    _, k2, v2 = random_qkv(rng, 1, 8, 8, 4, 2, 16)
    with pytest.raises(diffattn.InvalidInputError, match="heads"):
        layer(q, k2, v2, out=out)
    with pytest.raises(diffattn.InvalidInputError, match="DLPack"):
        layer(q.tolist(), k, v, out=out)
    with pytest.raises(diffattn.InvalidInputError, match="mask"):
        layer(q, k, v, mask=np.ones((1, 8), dtype=np.float32), out=out)
    with pytest.raises(ValueError):  # usage errors are ValueErrors too
        layer(q[0], k, v, out=out)
    np.testing.assert_array_equal(out, before)


def test_an_explicit_gpu_backend_on_the_cpu_is_refused_not_swapped():
    with pytest.raises(diffattn.CannotRunHereError) as refused:
        diffattn.Attention(num_heads=8, head_size=128, config={"default": "FLASH_ATTN"}, platform="cpu")
    assert refused.value.exit_code == 3
    assert "FLASH_ATTN" in str(refused.value)


def test_an_unknown_backend_names_itself():
    with pytest.raises(diffattn.UnknownBackendError, match="NO_SUCH_BACKEND") as unknown:
        diffattn.Attention(num_heads=2, head_size=64, config={"default": "NO_SUCH_BACKEND"}, platform="cpu")
    assert isinstance(unknown.value, ValueError) and unknown.value.exit_code == 2


def test_session_and_config_together_is_a_usage_error():
    session = diffattn.Session(config=SDPA, platform="cpu")
    with pytest.raises(diffattn.UsageError, match="session"):
        diffattn.Attention(num_heads=2, head_size=64, session=session, config=SDPA)


def test_functional_calls_reuse_one_layer_per_declaration(rng):
    session = diffattn.Session(config=SDPA, platform="cpu")
    q, k, v = random_qkv(rng, 1, 5, 6, 2, 2, 8)
    first = diffattn.attention(q, k, v, session=session, role="cross")
    second = diffattn.attention(q, k, v, session=session, role="cross")
    np.testing.assert_array_equal(first, second)
    layer = session.route("cross").layer_for(q, k, None, False)
    assert layer is session.route("cross").layer_for(q, k, None, False)
    assert layer.role == "cross" and layer.backend == "TORCH_SDPA"


def test_a_read_only_array_is_an_input_error_not_a_crash(rng):
    q, k, v = random_qkv(rng, 1, 4, 4, 2, 2, 8)
    frozen = np.broadcast_to(q[:1], q.shape)  # read-only view, which NumPy will not export by DLPack
    with pytest.raises(diffattn.InvalidInputError, match="q"):
        diffattn.attention(frozen, k, v, config=SDPA, platform="cpu")
