"""diffattn.tune (the tool's `diffattn tune`), loading what it wrote, and the tuned-elsewhere warning."""

from __future__ import annotations

import json
import warnings

import pytest

import diffattn
from diffattn.tune import cli_path


@pytest.fixture
def cli():
    try:
        return cli_path()
    except diffattn.UnavailableError as e:
        pytest.skip(str(e))


def quick(tmp_path):
    return ["--layers", "1", "--warmup", "0", "--repeats", "1", "--out-dir", str(tmp_path / "run")]


def test_tune_writes_a_config_that_reloads_to_the_same_resolution(cli, tmp_path):
    output = tmp_path / "tuned.json"
    config = diffattn.tune("tiny-dit", output, platform="cpu", extra_args=quick(tmp_path))
    record = json.loads((tmp_path / "tuned.tuning.json").read_text())
    assert set(config.per_role) == {role["role"] for role in record["roles"]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tuned here: no warning
        session = diffattn.Session(config=diffattn.AttentionConfig.from_file(output), platform="cpu")
    for role in record["roles"]:
        resolution = session.resolve(role["role"], 64)
        assert resolution.backend == config.per_role[role["role"]].backend
        assert resolution.source == "per_role"


def test_a_config_tuned_elsewhere_warns_when_a_session_uses_it(cli, tmp_path):
    output = tmp_path / "tuned.json"
    diffattn.tune("tiny-dit", output, platform="cpu", extra_args=quick(tmp_path))
    record_path = tmp_path / "tuned.tuning.json"
    record = json.loads(record_path.read_text())
    record["tuned_on"] = {"kind": "cuda", "device_name": "NVIDIA H200", "compute_capability": "9.0"}
    record["description"] = "NVIDIA H200 (sm_90)"
    record_path.write_text(json.dumps(record))
    with pytest.warns(diffattn.TunedElsewhereWarning, match="tuned on NVIDIA H200"):
        diffattn.Session(config=f"@{output}", platform="cpu")


def test_a_bad_tune_request_raises_the_tools_error_class(cli, tmp_path):
    with pytest.raises(diffattn.UsageError, match="quality-bound"):
        diffattn.tune("tiny-dit", tmp_path / "x.json", quality_bound=-1.0, platform="cpu", extra_args=quick(tmp_path))
    with pytest.raises(diffattn.UsageError, match="no-such-model"):
        diffattn.tune("no-such-model", tmp_path / "x.json", platform="cpu", extra_args=quick(tmp_path))
    assert not (tmp_path / "x.json").exists()
