"""AttentionConfig, AttentionSpec and the typed blocks: normalised and validated by the core, with the
core's messages (the same as the command-line tool's)."""

from __future__ import annotations

import json
import subprocess

import pytest

import diffattn
from diffattn import _native
from conftest import cli_path


def test_the_seeds_form_and_a_plain_dict_give_the_same_config():
    typed = diffattn.AttentionConfig(
        default=diffattn.AttentionSpec(backend="FLASH_ATTN"),
        per_role={"cross": diffattn.AttentionSpec(backend="TORCH_SDPA")},
    )
    plain = diffattn.AttentionConfig.from_dict(
        {"default": {"backend": "FLASH_ATTN"}, "per_role": {"cross": {"backend": "TORCH_SDPA"}}}
    )
    shorthand = diffattn.AttentionConfig(default="FLASH_ATTN", per_role={"cross": "TORCH_SDPA"})
    assert typed == plain == shorthand
    assert isinstance(plain.per_role["cross"], diffattn.AttentionSpec)


def test_typed_blocks_come_back_typed_with_the_cores_defaults():
    spec = diffattn.AttentionSpec(
        backend="TRTLLM_ATTN",
        quant={"dtype_qk": "int8", "dtype_vo": "fp8_e4m3"},
        skip_softmax=diffattn.SkipSoftmaxSpec(threshold=0.25),
    )
    assert isinstance(spec.quant, diffattn.AttnQuantSpec)
    assert spec.quant.dtype_vo == "fp8_e4m3"
    assert spec.quant.k_block_size is not None  # filled by the core, not by Python
    assert spec.skip_softmax.threshold == 0.25
    rain = diffattn.AttentionSpec(backend="RAINFUSION_ATTN", block_sparse=diffattn.BlockSparseSpec(skip_layers=[0, 1, 2, 7]))
    assert rain.block_sparse.sparsity is not None and rain.block_sparse.precision is not None
    assert rain.block_sparse.skip_layers == "0,1,2,7"


def test_nested_roles_flatten_and_auto_drops():
    config = diffattn.AttentionConfig.from_dict(
        {"default": "auto", "per_role": {"ltx2": {"audio_to_video": {"backend": "TORCH_SDPA"}}, "self": "auto"}}
    )
    assert config.default is None
    assert list(config.per_role) == ["ltx2.audio_to_video"]


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"default": {"backend": "TORCH_SDPA", "quant": {"dtype_vo": "fp8_e4m3"}}}, ["quant", "TORCH_SDPA"]),
        ({"default": {"backend": "TRTLLM_ATTN", "skip_softmax": {"threshold": 0.1, "target_sparsity": 0.5}}},
         ["threshold", "target_sparsity"]),
        ({"default": {"backend": "RAINFUSION_ATTN", "block_sparse": {"sparsity": 1.5}}}, ["sparsity"]),
        ({"default": {"backend": "FLASH_ATTN", "no_such_key": 1}}, ["no_such_key"]),
        ({"defaults": {"backend": "FLASH_ATTN"}}, ["defaults"]),
    ],
)
def test_invalid_configs_raise_the_cores_message(bad, words):
    with pytest.raises(diffattn.InvalidConfigError) as error:
        diffattn.AttentionConfig.from_dict(bad)
    assert error.value.exit_code == 2
    for word in words:
        assert word in str(error.value)
    # The same text the C interface gives for the same configuration: one implementation.
    with pytest.raises(diffattn.InvalidConfigError) as through_session:
        diffattn.Session(config=json.dumps(bad), platform="cpu")
    assert str(through_session.value) == str(error.value)


@pytest.mark.skipif(cli_path() is None, reason="DIFFATTN_CLI (the built diffattn tool) not given")
def test_the_message_is_the_command_line_tools():
    bad = {"default": {"backend": "RAINFUSION_ATTN", "block_sparse": {"precision": "fp4"}}}
    with pytest.raises(diffattn.InvalidConfigError) as error:
        diffattn.AttentionConfig.from_dict(bad)
    run = subprocess.run(
        [cli_path(), "resolve", "--role", "self", "--head-size", "64", "--platform", "cpu", "--json",
         "--diffusion-attention-config", json.dumps(bad)],
        capture_output=True, text=True, check=False,
    )
    assert run.returncode == error.value.exit_code
    assert json.loads(run.stdout)["error"]["message"] == str(error.value)


def test_spec_fields_of_the_wrong_type_are_the_cores_errors():
    with pytest.raises(diffattn.InvalidConfigError, match="fastvideo_vsa_topk"):
        diffattn.AttentionSpec(backend="FASTVIDEO_VSA", fastvideo_vsa_topk=0)
    with pytest.raises(diffattn.InvalidConfigError):
        diffattn.AttentionSpec(backend="FLASHINFER_ATTN", quant="fp8")
    with pytest.raises(diffattn.InvalidConfigError, match="auto"):
        diffattn.AttentionSpec(backend="auto")
    with pytest.raises(diffattn.InvalidConfigError):
        diffattn.AttentionConfig.from_dict(["FLASH_ATTN"])


def test_a_config_file_loads_and_round_trips(tmp_path):
    config = diffattn.AttentionConfig(default="TORCH_SDPA", per_role={"cross": {"backend": "CUDNN_ATTN"}})
    path = tmp_path / "attention.json"
    path.write_text(config.to_json())
    assert diffattn.AttentionConfig.from_file(path) == config
    assert diffattn.AttentionConfig.normalise(f"@{path}") == config
    path.write_text('{"default": {"backend": "TORCH_SDPA"}, "default": {"backend": "FLASH_ATTN"}}')
    with pytest.raises(diffattn.InvalidConfigError, match="twice"):
        diffattn.AttentionConfig.from_file(path)


def test_every_code_has_the_class_of_its_command_line_exit_code():
    for code in range(1, 8):
        cls = _native.error_class(code)
        assert cls.exit_code == _native.lib.diffattn_exit_code(code)
        assert cls is diffattn.errors.BY_CODE[_native.lib.diffattn_code_name(code).decode()]
