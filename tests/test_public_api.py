"""The public API: the names `batchgate` exports, pinned, each loading from its module, and
`import batchgate` itself staying light (the gateway and aiohttp load on first use)."""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

import batchgate

# Each public name and the module a user would find it in, pinned here apart from the package's own
# table (`batchgate._WHERE`), so a name loaded from the wrong module fails.
HOME = {
    "BatchgateError": "batchgate.errors",
    "ChatBody": "batchgate.models",
    "Clock": "batchgate.clock",
    "ConfigError": "batchgate.errors",
    "Emulator": "batchgate.emulator",
    "EmulatorConfig": "batchgate.emulator",
    "FakeClock": "batchgate.clock",
    "Gateway": "batchgate.gateway",
    "GatewayConfig": "batchgate.config",
    "GatewayStatistics": "batchgate.stats",
    "InputError": "batchgate.errors",
    "Job": "batchgate.jobs.api",
    "JobError": "batchgate.errors",
    "JobResult": "batchgate.jobs.api",
    "LoopClock": "batchgate.clock",
    "ProviderError": "batchgate.errors",
    "RateLimitError": "batchgate.errors",
    "Result": "batchgate.models",
    "Usage": "batchgate.models",
    "config_from_dict": "batchgate.config",
    "load_config": "batchgate.config",
    "load_emulator_config": "batchgate.emulator",
}
PUBLIC = list(HOME)


def test_the_exported_names_are_pinned_and_sorted() -> None:
    assert batchgate.__all__ == PUBLIC
    assert sorted(batchgate.__all__) == batchgate.__all__


@pytest.mark.parametrize("name", PUBLIC)
def test_each_name_is_the_object_its_module_defines(name: str) -> None:
    value = getattr(batchgate, name)
    assert value is getattr(import_module(HOME[name]), name)


def test_what_the_type_checker_sees_is_what_loads() -> None:
    """The `if TYPE_CHECKING:` imports (what mypy and editors see) name the same modules as the
    names load from at run time: a name moved in one place and not the other fails here."""
    tree = ast.parse(Path(batchgate.__file__).read_text(encoding="utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen = {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == HOME
    assert batchgate._WHERE == HOME


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = batchgate.Nope


def test_the_readme_import_works() -> None:
    code = "from batchgate import Gateway, load_config; print(Gateway.__module__, load_config.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["batchgate.gateway", "batchgate.config.load"]


def test_importing_batchgate_loads_neither_the_gateway_nor_aiohttp() -> None:
    code = "import sys, batchgate; print('batchgate.gateway' in sys.modules, 'aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
