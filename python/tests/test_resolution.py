"""Per-role resolution (backend, spec, source), the environment default, and platforms probed or described."""

from __future__ import annotations

import pytest

import diffattn

HOPPER = {"kind": "cuda", "compute_capability": "9.0", "device_name": "H200", "cudnn_version": "9.5.0",
          "features": {"flash_attn": True}}


def test_resolution_order_per_role_category_default_platform():
    session = diffattn.Session(
        config={"default": "TORCH_SDPA", "per_role": {"cross": "CUDNN_ATTN", "wan.self": "FLASH_ATTN"}},
        platform=HOPPER,
    )
    exact = session.resolve("wan.self", 128, category="self")
    assert (exact.backend, exact.source) == ("FLASH_ATTN", "per_role")
    category = session.resolve("wan.cross", 128, category="cross")
    assert (category.backend, category.source) == ("CUDNN_ATTN", "category")
    assert category.spec == diffattn.AttentionSpec(backend="CUDNN_ATTN")
    default = session.resolve("joint", 128)
    assert (default.backend, default.source) == ("TORCH_SDPA", "default")


def test_a_platform_default_has_no_spec_and_says_what_it_passed_over():
    no_flash = dict(HOPPER, features={"flash_attn": False})
    resolution = diffattn.resolve("self", 128, platform=no_flash)
    assert resolution.source == "platform" and resolution.spec is None
    assert resolution.backend == "TORCH_SDPA"
    assert any(c.backend == "FLASH_ATTN" and c.reason for c in resolution.considered)
    assert diffattn.resolve("self", 128, platform=HOPPER).backend == "FLASH_ATTN"


def test_the_environment_fills_the_default_only(monkeypatch):
    monkeypatch.setenv("DIFFUSION_ATTENTION_BACKEND", "TORCH_SDPA")
    session = diffattn.Session(config={"per_role": {"cross": "CUDNN_ATTN"}}, platform=HOPPER)
    assert session.config.default == diffattn.AttentionSpec(backend="TORCH_SDPA")
    assert session.resolve("self", 128).source == "env"
    explicit = diffattn.Session(config={"default": "FLASH_ATTN"}, platform=HOPPER)
    assert explicit.resolve("self", 128).backend == "FLASH_ATTN"


def test_platforms_probed_and_described():
    cpu = diffattn.Platform.probe("cpu")
    assert cpu.kind == "cpu" and cpu.description
    described = diffattn.Platform.describe(HOPPER)
    assert described.kind == "cuda" and described.info["compute_capability"] == "9.0"
    assert "H200" in described.description
    # A described platform is reusable as it is.
    assert diffattn.Session(platform=described).platform == described
    with pytest.raises(diffattn.InvalidConfigError, match="platform"):
        diffattn.Platform.describe({"kind": "tpu"})
    with pytest.raises(diffattn.InvalidConfigError, match="no-such-file.json"):
        diffattn.Platform.describe("no-such-file.json")


def test_a_layer_reports_its_resolution():
    layer = diffattn.Attention(num_heads=4, head_size=64, role="wan.cross", category="cross",
                               config={"per_role": {"cross": "TORCH_SDPA"}}, platform="cpu")
    resolution = layer.resolution
    assert (resolution.role, resolution.backend, resolution.source) == ("wan.cross", "TORCH_SDPA", "category")
    assert "TORCH_SDPA" in repr(layer)


def test_a_library_that_cannot_be_loaded_is_an_import_error_that_says_what_to_do(tmp_path):
    import subprocess
    import sys

    fake = tmp_path / "libdiffattn.so"
    fake.write_text("not a shared library")
    run = subprocess.run(
        [sys.executable, "-c", "import diffattn"],
        env={**__import__("os").environ, "DIFFATTN_LIBRARY": str(fake)},
        capture_output=True, text=True, check=False,
    )
    assert run.returncode != 0
    assert "ImportError" in run.stderr and "could not be loaded" in run.stderr and "LD_LIBRARY_PATH" in run.stderr
