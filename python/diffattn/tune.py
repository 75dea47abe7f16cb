"""`diffattn.tune`: the command-line tool's `diffattn tune`, from Python.

The tool runs the model's attention workload (the model zoo, the activations, the timing and the
quality check are the C++ runner's) through every backend that can run here and writes the fastest
per role within the quality bound; this function runs it and loads what it wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Sequence

from . import errors
from .config import AttentionConfig


def cli_path() -> str:
    """The `diffattn` tool: DIFFATTN_CLI, the one installed with this package, or the one on PATH."""
    candidates = [os.environ.get("DIFFATTN_CLI"), str(Path(sysconfig.get_path("scripts")) / "diffattn"), shutil.which("diffattn")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise errors.UnavailableError(
        "the diffattn tool was not found (installed with the package by `pip install .`, or set DIFFATTN_CLI "
        "to a built build/<preset>/bin/diffattn)",
        "unavailable",
    )


def tune(
    model: str,
    output: str | os.PathLike = "attention-config.json",
    *,
    quality_bound: float | None = None,
    platform: str | None = None,
    extra_args: Sequence[str] = (),
) -> AttentionConfig:
    """Runs `diffattn tune --model MODEL --output OUTPUT` and returns the configuration it wrote.

    extra_args are diffattn run's flags (e.g. ["--height", "704", "--layers", "3", "--compare",
    "FLASH_ATTN,CUDNN_ATTN"]). OUTPUT.tuning.json beside it holds the measurements.
    """
    args = [cli_path(), "tune", "--model", model, "--output", os.fspath(output), "--json"]
    if quality_bound is not None:
        args += ["--quality-bound", repr(float(quality_bound))]
    if platform is not None:
        args += ["--platform", platform]
    args += list(extra_args)
    run = subprocess.run(args, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        try:
            error = json.loads(run.stdout)["error"]
        except (ValueError, KeyError, TypeError):
            error = {"code": "internal", "message": (run.stderr or run.stdout).strip()}
        raise errors.BY_CODE.get(error["code"], errors.DiffattnError)(error["message"], error["code"])
    return AttentionConfig.from_file(output)
