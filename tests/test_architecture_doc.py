"""docs/architecture.md cannot drift quietly: its package tree (the fenced block under "The
packages") names every module and subpackage of `src/batchgate`, so a module added without a word
in the map fails here — as 20 of them had drifted out before this test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "batchgate"
DOC = ROOT / "docs" / "architecture.md"


def package_tree(text: str) -> str:
    """The fenced block that follows the "## The packages" heading."""
    after = text.split("## The packages", 1)[1]
    return after.split("```", 2)[1]


def unnamed(tree: str, src: Path = SRC) -> list[str]:
    """The modules (by file stem) and packages (by folder name + '/') the tree does not name."""
    missing = []
    for path in sorted(src.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        if path.name == "__init__.py":
            if path.parent == src:
                continue
            name, pattern = f"{path.parent.name}/", rf"(?<![\w-]){re.escape(path.parent.name)}/"
        else:
            name, pattern = path.stem, rf"(?<![\w-]){re.escape(path.stem)}(?![\w-])"
        if not re.search(pattern, tree):
            missing.append(f"{path.relative_to(src)} ({name})")
    return missing


def test_the_package_tree_names_every_module_and_package() -> None:
    assert unnamed(package_tree(DOC.read_text(encoding="utf-8"))) == []


def test_a_module_left_out_of_the_tree_is_found(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "named.py").write_text("")
    (tmp_path / "pkg" / "forgotten.py").write_text("")
    assert unnamed("  pkg/   named (a module the map names)", tmp_path) == ["pkg/forgotten.py (forgotten)"]
