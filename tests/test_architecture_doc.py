"""docs/architecture.md cannot drift quietly: its package tree (the fenced block under "The
packages") names every module and subpackage of `src/batchgate`, and its layer tables are the
import-linter contracts, so a module added without a word
in the map fails here — as 20 of them had drifted out before this test."""

from __future__ import annotations

import re
import tomllib
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


PYPROJECT = ROOT / "pyproject.toml"


def contract_layers(container: str | None) -> list[set[str]]:
    """The layers of the import-linter contract over `container` (None: the top one), top first,
    each a set of names without the `batchgate.` prefix."""
    contracts = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    for c in contracts:
        if c["type"] == "layers" and c.get("containers", [None])[0] == container:
            return [{n.strip().removeprefix("batchgate.") for n in layer.split("|")} for layer in c["layers"]]
    raise AssertionError(f"no layers contract for {container}")


def table_layers(text: str) -> list[set[str]]:
    """The top-level layers table's second column: each row's backticked names."""
    table = text.split("## Layers", 1)[1].split("\n\n", 3)[2]
    rows = [line.split("|")[2:] for line in table.splitlines() if re.match(r"\| \d", line)]
    return [set(re.findall(r"`([\w.]+)`", "|".join(r[:-2]))) for r in rows]


def block_layers(text: str, heading: str) -> list[set[str]]:
    """A fenced "Inside `X/`" block's layers: each unindented line's names before the description."""
    block = text.split(heading, 1)[1].split("```", 2)[1]
    layers = []
    for line in block.splitlines():
        if line and not line[0].isspace():
            names = re.split(r"\s{2,}", line.strip())[0]
            layers.append({n.strip() for n in names.split("|")})
    return layers


def test_the_layer_tables_are_the_import_contracts() -> None:
    """The layers table and the `jobs/`, `server/` blocks say what `lint-imports` enforces."""
    text = DOC.read_text(encoding="utf-8")
    assert table_layers(text) == contract_layers(None)
    assert block_layers(text, "Inside `jobs/`") == contract_layers("batchgate.jobs")
    assert block_layers(text, "Inside `server/`") == contract_layers("batchgate.server")


def test_a_layer_the_table_leaves_out_is_found() -> None:
    """A table naming fewer layers than the contract is told apart from it."""
    text = (
        "## Layers\n\nintro\n\n| layer | packages | owns |\n|---|---|---|\n"
        "| 1 | `cli` | x |\n| 2 | `jobs` | y |\n"
    )
    assert table_layers(text) == [{"cli"}, {"jobs"}]
    assert table_layers(text) != contract_layers(None)
