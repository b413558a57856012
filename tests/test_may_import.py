"""Each package docstring's "May import" line is a rule, checked against the real imports.

The clause after "May import:" (up to the first `.` or `;` that ends a sentence) is read as an
allow-list. Every backticked name in it is a module or package (`jobs.store`, `tenancy`,
`batchgate.config`), resolved from the package outward: a sibling first, then its parent's
siblings, up to `batchgate.` itself; a name that resolves to nothing fails, so a renamed or removed
package cannot linger in a docstring. Three phrases widen it: "the core" (the layers from `models`
down in the top import-linter contract), "below" (every name in the clause brings the layers under
it, in the innermost layers contract that holds it) and "anything in batchgate". A later sentence
of the same paragraph that starts with "Not" or "Never" forbids the names backticked in it, even
where the clause's "below" would allow them. Whatever the package imports from outside itself
(imports inside functions and under `TYPE_CHECKING` included, as grimp sees them) must be
allowed, or this fails naming the import and the package.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "batchgate"
CORE_FROM = "batchgate.models"  # "the core": this layer and every layer below it


@dataclass(frozen=True)
class Contract:
    """One import-linter layers contract: its container ("batchgate" for the top one) and its
    layers, top first, each a set of full module names."""

    container: str
    layers: tuple[frozenset[str], ...]


def contracts(pyproject: Path = ROOT / "pyproject.toml") -> list[Contract]:
    found = []
    for c in tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]:
        if c["type"] != "layers":
            continue
        container = c.get("containers", ["batchgate"])[0]
        layers = []
        for layer in c["layers"]:
            names = (n.strip() for n in layer.split("|"))
            full = (
                n if n.startswith("batchgate.") or container == "batchgate" else f"{container}.{n}"
                for n in names
            )
            layers.append(frozenset(n if n.startswith("batchgate.") else f"batchgate.{n}" for n in full))
        found.append(Contract(container, tuple(layers)))
    return found


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def below(name: str, rules: Iterable[Contract]) -> set[str]:
    """The layers under the one that holds `name`, in the innermost contract holding it."""
    best: tuple[int, set[str]] | None = None
    for c in rules:
        for i, layer in enumerate(c.layers):
            if any(_within(name, n) for n in layer) and (best is None or len(c.container) > best[0]):
                best = (len(c.container), set().union(*c.layers[i + 1 :]))
    return best[1] if best else set()


def core(rules: Iterable[Contract]) -> set[str]:
    top = next(c for c in rules if c.container == "batchgate")
    start = next(i for i, layer in enumerate(top.layers) if CORE_FROM in layer)
    return set().union(*top.layers[start:])


def clause(doc: str) -> str | None:
    """The text after "May import:" up to the end of its first sentence, or None."""
    if "May import:" not in doc:
        return None
    rest = doc.split("May import:", 1)[1]
    return re.split(r"[.;](?:\s|$)", rest, maxsplit=1)[0]


def forbidding(doc: str) -> list[str]:
    """The sentences after the clause, in its paragraph, that start with "Not" or "Never"."""
    if "May import:" not in doc:
        return []
    paragraph = doc.split("May import:", 1)[1].split("\n\n", 1)[0]
    sentences = re.split(r"[.;](?:\s+|$)", paragraph)[1:]
    return [s for s in sentences if re.match(r"(?:Not|Never)\b", s.strip())]


def resolve(name: str, package: str, modules: set[str]) -> str | None:
    """A backticked name as a module: `batchgate.x` as written, else the nearest enclosing
    package's `x` (a sibling first), else None."""
    if name.startswith("batchgate.") or name == "batchgate":
        return name if name in modules else None
    parts = package.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        candidate = ".".join([*parts[:depth], name])
        if candidate in modules:
            return candidate
    return None


def _named(text: str, package: str, modules: set[str], unknown: list[str]) -> set[str]:
    found = set()
    for name in re.findall(r"`([\w.]+)`", text):
        module = resolve(name, package, modules)
        if module is None:
            unknown.append(name)
        else:
            found.add(module)
    return found


def allowed(
    doc: str, package: str, modules: set[str], rules: list[Contract]
) -> tuple[set[str], set[str], list[str]]:
    """What a package's "May import" clause allows and what its "Not" / "Never" sentences forbid
    (module prefixes), and the names either cites that are not modules."""
    text = clause(doc) or ""
    unknown: list[str] = []
    forbidden = set().union(*(_named(s, package, modules, unknown) for s in forbidding(doc)))
    if "anything in batchgate" in text:
        return {"batchgate"}, forbidden, unknown
    prefixes = _named(text, package, modules, unknown)
    if "the core" in text:
        prefixes |= core(rules)
    if "below" in text:
        for module in list(prefixes):
            prefixes |= below(module, rules)
    return prefixes, forbidden, unknown


def breaches(
    package: str, prefixes: set[str], forbidden: set[str], imports: Mapping[str, set[str]]
) -> list[str]:
    """Imports from inside `package` to outside it that no allowed prefix covers, or a forbidden
    one does."""
    found = []
    for importer, imported in sorted(imports.items()):
        if not _within(importer, package):
            continue
        for target in sorted(imported):
            if _within(target, package) or not target.startswith("batchgate."):
                continue
            if not any(_within(target, p) for p in prefixes) or any(_within(target, f) for f in forbidden):
                found.append(f"{importer} -> {target}")
    return found


def package_docstrings(src: Path = SRC) -> dict[str, str]:
    found = {}
    for init in sorted(src.rglob("__init__.py")):
        if init.parent == src:
            continue
        package = ".".join(["batchgate", *init.parent.relative_to(src).parts])
        found[package] = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    return found


def problems(docs: Mapping[str, str], imports: Mapping[str, set[str]], rules: list[Contract]) -> list[str]:
    modules = set(imports)
    found = []
    for package, doc in sorted(docs.items()):
        prefixes, forbidden, unknown = allowed(doc, package, modules, rules)
        found += [f"{package}: its docstring names `{name}`, which is no module" for name in unknown]
        found += [
            f"{package}: {b} (not in its 'May import')"
            for b in breaches(package, prefixes, forbidden, imports)
        ]
    return found


def test_every_package_imports_only_what_its_docstring_allows() -> None:
    g = grimp.build_graph("batchgate", cache_dir=None)
    imports = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    assert problems(package_docstrings(), imports, contracts()) == []


_FAKE_RULES = [
    Contract(
        "batchgate",
        (frozenset({"batchgate.top"}), frozenset({"batchgate.mid"}), frozenset({"batchgate.models"})),
    ),
    Contract("batchgate.top", (frozenset({"batchgate.top.a"}), frozenset({"batchgate.top.b"}))),
]
_FAKE_IMPORTS = {
    "batchgate.top": set(),
    "batchgate.top.a": {"batchgate.top.b", "batchgate.mid", "batchgate.models"},
    "batchgate.top.b": {"batchgate.models"},
    "batchgate.mid": {"batchgate.models"},
    "batchgate.models": set(),
}


def test_an_import_the_docstring_does_not_allow_is_found() -> None:
    docs = {"batchgate.top.a": "Owns a.\n\nMay import: the core. Not `mid`."}
    assert problems(docs, _FAKE_IMPORTS, _FAKE_RULES) == [
        "batchgate.top.a: batchgate.top.a -> batchgate.mid (not in its 'May import')",
        "batchgate.top.a: batchgate.top.a -> batchgate.top.b (not in its 'May import')",
    ]


def test_below_and_siblings_are_resolved_and_a_stale_name_is_found() -> None:
    docs = {"batchgate.top.a": "May import: `b`, `mid` and what lies below them; `gone`."}
    assert problems(docs, _FAKE_IMPORTS, _FAKE_RULES) == []
    docs = {"batchgate.top.a": "May import: `b`, `mid`, `gone` and what lies below them."}
    assert problems(docs, _FAKE_IMPORTS, _FAKE_RULES) == [
        "batchgate.top.a: its docstring names `gone`, which is no module"
    ]


def test_a_never_sentence_takes_back_what_below_allowed() -> None:
    docs = {"batchgate.top.a": "May import: `b`, `mid` and what lies below them.\n\nNever `models`."}
    assert problems(docs, _FAKE_IMPORTS, _FAKE_RULES) == []  # another paragraph: not the rule's
    docs = {"batchgate.top.a": "May import: `b`, `mid` and what lies below them. Never `models`.\n\nMore."}
    assert problems(docs, _FAKE_IMPORTS, _FAKE_RULES) == [
        "batchgate.top.a: batchgate.top.a -> batchgate.models (not in its 'May import')",
    ]
