"""docs/python.md's complete example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"


@pytest.mark.skipif(not DOC.exists(), reason="docs/python.md is not beside this test (an installed copy)")
def test_the_complete_example_runs():
    example = re.search(r"## A complete example\n\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert example, "docs/python.md lost its complete example"
    namespace: dict = {}
    exec(compile(example.group(1), str(DOC), "exec"), namespace)
    assert namespace["out"].shape == (2, 128, 8, 64) and namespace["lse"].shape == (2, 8, 128)
