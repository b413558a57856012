"""Issue 45: the suite's own install step works from inside a venv, not only from the machine's
Python. A fresh venv is made (its packages seen through a `.pth`, not as system site packages, as
in a user's venv); from inside it, `tests/venvs.py` builds the nested venv the first-hour tests
use and installs the checkout there; that venv must import batchgate's dependencies and the
checkout's batchgate, and run its CLI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from venvs import clean_env, nested_venv, outer_package_dirs

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"

INSIDE = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from venvs import install_checkout, nested_venv
python = nested_venv(Path({home!r}))
install_checkout(python, Path({root!r}))
print(python)
"""


def test_the_nested_venv_sees_this_environments_packages(tmp_path: Path) -> None:
    python = nested_venv(tmp_path)
    seen = subprocess.run(
        [str(python), "-c", "import sys, aiohttp, orjson, yaml; print(sys.prefix)"],
        check=False, env=clean_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert seen.returncode == 0, seen.stderr
    assert Path(seen.stdout.strip()) == tmp_path / "v"
    assert outer_package_dirs(), "no package directory found for this environment"


def test_the_install_step_works_from_inside_a_venv(tmp_path: Path) -> None:
    outer = nested_venv(tmp_path / "outer")  # a user's venv: no system site packages
    base_only = subprocess.run(
        [str(outer), "-c", "import sys; print(sys.base_prefix != sys.prefix)"],
        check=True, env=clean_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert base_only.stdout.strip() == "True"
    script = INSIDE.format(tests=str(TESTS), home=str(tmp_path / "inner"), root=str(ROOT))
    built = subprocess.run(
        [str(outer), "-c", script], check=False, env=clean_env(), capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stderr[-2000:]
    inner = Path(built.stdout.strip().splitlines()[-1])
    ran = subprocess.run(
        [str(inner), "-m", "batchgate", "--help"],
        check=False,
        env=clean_env(),
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "run" in ran.stdout
    imports = subprocess.run(
        [str(inner), "-c", "import aiohttp, jsonschema, regex, batchgate; print(batchgate.__file__)"],
        check=False, env=clean_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert imports.returncode == 0, imports.stderr
    assert Path(imports.stdout.strip()) == ROOT / "src" / "batchgate" / "__init__.py"
