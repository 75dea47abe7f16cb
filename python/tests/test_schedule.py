"""An attention schedule from Python: a session takes it, its layers take the denoising step per call."""

from __future__ import annotations

import numpy as np
import pytest

import diffattn
from conftest import random_qkv, reference_attention
from diffattn.errors import InvalidConfigError, InvalidInputError, UnsupportedError

SDPA = {"default": {"backend": "TORCH_SDPA"}}
LATE = {"profiles": {"late": {"default": "TORCH_SDPA"}}, "steps": [{"start": 2, "end": None, "profile": "late"}]}


def test_a_scheduled_layer_runs_at_every_step_and_needs_it(rng):
    q, k, v = random_qkv(rng, 1, int(rng.integers(3, 20)), int(rng.integers(3, 20)), 2, 2, 32)
    session = diffattn.Session(config=SDPA, platform="cpu", schedule=LATE)
    layer = session.layer(num_heads=2, head_size=32)
    want = reference_attention(q, k, v)[0]
    for step in (0, 1, 2, 7):
        np.testing.assert_allclose(layer(q, k, v, step=step), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(InvalidInputError, match="denoising step"):
        layer(q, k, v)


def test_a_sigma_schedule_needs_the_calls_sigma(rng):
    q, k, v = random_qkv(rng, 1, 5, 7, 2, 2, 32)
    schedule = '{"profiles": {"late": {"default": "TORCH_SDPA"}}, "sigma": [{"low": 0, "high": 0.5, "profile": "late"}]}'
    layer = diffattn.Session(config=SDPA, platform="cpu", schedule=schedule).layer(num_heads=2, head_size=32)
    np.testing.assert_allclose(layer(q, k, v, step=3, sigma=0.25), reference_attention(q, k, v)[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(InvalidInputError, match="carries no sigma"):
        layer(q, k, v, step=3)


def test_schedules_are_checked_by_the_librarys_rules():
    with pytest.raises(InvalidConfigError, match="unknown profile 'sparse'"):
        diffattn.Session(config=SDPA, platform="cpu",
                         schedule={"profiles": {"late": {"default": "TORCH_SDPA"}}, "steps": [{"start": 0, "profile": "sparse"}]})
    session = diffattn.Session(config=SDPA, platform="cpu",
                               schedule={"profiles": {"fast": {"default": "FLASH_ATTN"}}, "steps": [{"start": 4, "profile": "fast"}]})
    with pytest.raises(UnsupportedError, match=r"schedule profile 'fast' \(steps \[4, end\)\), role 'self'"):
        session.layer(num_heads=2, head_size=32)
