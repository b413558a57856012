"""CONTRIBUTING.md cannot name what is gone: every path, module and name it puts in backticks is
checked against the repository.

- A path (`jobs/input/`, `tests/jobs/test_worker.py`, `*_chunks.py`, `apply.lua`) must exist, read
  from the folder the text is about: each bullet starts at `src/batchgate/`, a folder named in it
  becomes where the next names are read, and a name not found there is looked for in the folders
  above it, up to the repository's root (so `schema.py` after `config/` is `config/schema.py`).
- A command's paths (`./scripts/test --fast tests/quota`) must exist from the root.
- A Python name (`LiveTasks`, `factory.make_batch_client`, `plan`) must be a module in those
  folders or a word of the source, tests, benches, scripts or pyproject.toml.

Flags, routes, placeholders and code snippets (with spaces, `=`, `*` outside a path) are left alone.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "CONTRIBUTING.md"
PACKAGE = ROOT / "src" / "batchgate"
CORPUS_DIRS = ("src", "tests", "bench", "scripts", "examples")
COMMAND_ROOTS = ("tests/", "bench/", "scripts/", "./scripts/", ".ci/", "docs/", "examples/")
EXTENSIONS = (".py", ".sql", ".lua", ".md", ".toml", ".js", ".css", ".html", ".json", ".yml", ".yaml")


def _is_path(token: str) -> bool:
    return "/" in token or token.endswith(EXTENSIONS)


def _exists(root: Path, token: str) -> Path | None:
    name = token.removeprefix("./").rstrip("/")
    if "*" in name:
        return next(iter(sorted(root.glob(name))), None)
    path = root / name
    return path if path.exists() else None


def _chain(context: Path, top: Path) -> Iterator[Path]:
    """`context` and each folder above it up to `top`."""
    yield context
    while context != top and top in context.parents:
        context = context.parent
        yield context


def _words(root: Path) -> set[str]:
    """Every word (a run of word characters) of the corpus: a name is in it as a whole word."""
    listed = ["git", "ls-files", *CORPUS_DIRS, "pyproject.toml"]
    files = subprocess.run(listed, cwd=root, capture_output=True, text=True, check=True).stdout.split()
    texts = ((root / f).read_text(encoding="utf-8", errors="replace") for f in files if (root / f).is_file())
    return set(re.findall(r"\w+", "\n".join(texts)))


def _is_module(name: str, context: Path, root: Path) -> bool:
    chain = _chain(context, root)
    return any((d / f"{name}.py").exists() or (d / name / "__init__.py").exists() for d in chain)


def _bullets(text: str) -> Iterator[str]:
    """The text cut where a bullet or a paragraph starts: each piece reads from `src/batchgate/`."""
    yield from re.split(r"\n(?=- )|\n\n", text)


def stale(text: str, root: Path = ROOT, package: Path = PACKAGE) -> list[str]:
    """The backticked names of `text` that name nothing in the repository at `root`."""
    vocabulary: set[str] | None = None
    missing = []
    for bullet in _bullets(text):
        context = package
        for token in re.findall(r"`([^`\n]+)`", bullet):
            if token.startswith(("-", "/", "_")) or ("=" in token and " " not in token):
                continue
            if " " in token:
                words = [w for w in token.split() if w.startswith(COMMAND_ROOTS)]
                missing += [f"{w} (in `{token}`)" for w in words if _exists(root, w) is None]
                continue
            if _is_path(token):
                found = next((p for d in _chain(context, root) if (p := _exists(d, token))), None)
                if found is None:
                    missing.append(token)
                elif found.is_dir():
                    context = found
                continue
            name = token.removeprefix("@")
            if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
                continue
            if _is_module(name, context, root):
                continue
            vocabulary = _words(root) if vocabulary is None else vocabulary
            if name.rsplit(".", 1)[-1] not in vocabulary:
                missing.append(token)
    return missing


def test_contributing_names_only_what_exists() -> None:
    assert stale(DOC.read_text(encoding="utf-8")) == []


def test_a_removed_package_module_or_name_is_found(tmp_path: Path) -> None:
    package = tmp_path / "src" / "batchgate"
    (package / "jobs" / "input").mkdir(parents=True)
    (package / "jobs" / "input" / "read.py").write_text("def read_tasks() -> None: ...\n")
    (package / "clock.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    text = (
        "- `jobs/input/` — `read.py` (`read_tasks`), `clock.py`, `first_lines.py`; `jobs/io/`.\n"
        "- `read.py` at the top is no module; `gone_name`, `tests/test_x.py`, `tests/test_y.py`.\n\n"
        'Run `./scripts/test --fast tests/nowhere` or `pytest -m "not slow"`; `--flag`, `/route`.'
    )
    assert stale(text, tmp_path, package) == [
        "first_lines.py",
        "jobs/io/",
        "read.py",
        "gone_name",
        "tests/test_y.py",
        "./scripts/test (in `./scripts/test --fast tests/nowhere`)",
        "tests/nowhere (in `./scripts/test --fast tests/nowhere`)",
    ]
