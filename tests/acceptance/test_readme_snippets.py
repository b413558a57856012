"""The README's Python snippets, as written: every ```python block is extracted and run in a fresh
interpreter from a copy of the checkout's `examples/` (the embedded emulator answers), so a
snippet that does not compile, names a file that is not there or prints nothing useful fails here.
The blocks that need a Ray cluster or a running `batchgate serve` are compiled only, each named."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.acceptance

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
# Compiled only: a block that imports one of these needs something a test cannot start as it names it.
NEEDS = {
    "from batchgate.integrations.ray import": "a Ray cluster, a Dataset `ds` and Redis at 10.0.0.5",
    "from openai import OpenAI": "`batchgate serve` on port 8500 and a key made by `keys create`",
}


def readme_blocks() -> list[str]:
    return BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def _needs(code: str) -> str | None:
    return next((why for start, why in NEEDS.items() if start in code), None)


def test_the_readme_has_python_snippets_and_each_compiles() -> None:
    blocks = readme_blocks()
    assert len(blocks) >= 3
    for i, code in enumerate(blocks):
        compile(code, f"README.md python block {i + 1}", "exec")  # no top-level `async for`, say
    assert set(filter(None, map(_needs, blocks))) == set(NEEDS.values())  # none stale


@pytest.mark.slow
@pytest.mark.parametrize("index", [i for i, code in enumerate(readme_blocks()) if _needs(code) is None])
def test_a_readme_snippet_runs_as_written(index: int, tmp_path: Path) -> None:
    code = readme_blocks()[index]
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    if "Gateway(" in code:
        assert "succeeded" in done.stdout, done.stdout
    if "Job(" in code:  # the durable job: it ran, and results() after run() yielded its results
        assert "completed 6 results in" in done.stdout, done.stdout
        answers = [line for line in done.stdout.splitlines() if line.startswith("review-")]
        assert len(answers) == 6, done.stdout
        assert all(" True " in line for line in answers), done.stdout
