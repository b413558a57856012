"""A fresh venv for a test, built from whatever environment the suite runs in.

`python -m venv --system-site-packages` makes the *base* interpreter's packages visible, not
the running environment's: run from a venv (as most users install), the nested one lacked every
dependency (issue 45). Here the nested venv is made from the base interpreter without system
site packages, and a `.pth` file lists the running environment's package directories after its
own, so it sees exactly what this suite sees — the machine's Python, a venv, pyenv or uv alike —
while batchgate itself is installed into it from the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

OUTER_PTH = "zz_outer_environment.pth"  # after the nested venv's own .pth files (batchgate's)


def clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH: the venv's own install is what runs."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def outer_package_dirs() -> list[str]:
    """Where this process imports packages from, in its order: `sys.path` less the standard
    library and the working directory (so a venv seen through another's `.pth` is seen too)."""
    stdlib = {sysconfig.get_path(name) for name in ("stdlib", "platstdlib")}
    dynload = {os.path.join(d, "lib-dynload") for d in stdlib}
    skip = {os.path.realpath(d) for d in stdlib | dynload}
    return [
        d for d in dict.fromkeys(sys.path)
        if d and os.path.isdir(d) and os.path.realpath(d) not in skip
    ]  # fmt: skip


def nested_venv(home: Path, *, outer: list[str] | None = None) -> Path:
    """A venv at `home/v` seeing `outer` (default: this environment's packages); its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(home / "v")], check=True, timeout=300
    )  # the running environment's pip, seen through the .pth, installs into it
    python = home / "v" / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, env=clean_env(), capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    dirs = outer_package_dirs() if outer is None else outer
    (Path(purelib) / OUTER_PTH).write_text("".join(f"{d}\n" for d in dirs), encoding="utf-8")
    return python


def install_checkout(python: Path, root: Path) -> None:
    """`pip install --no-deps -e root` into the venv of `python`; checks that it is what imports."""
    env = clean_env()
    install = [str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(root)]
    subprocess.run(install, check=True, timeout=300, env=env, cwd=python.parent, capture_output=True)
    where = subprocess.run(
        [str(python), "-c", "import batchgate; print(batchgate.__file__)"],
        check=True, env=env, cwd=python.parent, capture_output=True, text=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()) == root / "src" / "batchgate" / "__init__.py"
