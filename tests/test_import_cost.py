"""The core's import stays light: what `batchgate --help` and a job's start-up import, checked in a
fresh interpreter (start-up time is a feature; the figures themselves come from bench/startup.py)."""

from __future__ import annotations

import subprocess
import sys

import orjson

# Each costs tens to hundreds of milliseconds (bpe_openai's Python wrapper: ~0.8 s and ~130 MB).
# redis (~0.2 s) loads only for a redis:// quota store; Ray Data (seconds, with numpy, pandas and
# pyarrow) only in an actor that imports batchgate.integrations.ray.
HEAVY = (
    "rich",
    "jsonschema",
    "bpe_openai",
    "bpe_openai.compat",
    "bpe_openai._bindings",
    "redis",
    "ray",
    "numpy",
    "pandas",
    "pyarrow",
    "opentelemetry",  # the otel extra: only a run or server that traces
)


def loaded_after(code: str, watch: tuple[str, ...]) -> list[str]:
    """The modules of `watch` that are imported after running `code` in a new interpreter."""
    report = f"print(orjson.dumps([m for m in {list(watch)!r} if m in sys.modules]).decode())"
    probe = f"{code}\nimport sys, orjson\n{report}"
    done = subprocess.run(
        [sys.executable, "-c", probe], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_the_command_line_parser_imports_no_machinery() -> None:
    code = "from batchgate.cli import build_parser\nbuild_parser().format_help()"
    watch = (
        *HEAVY,
        "aiohttp",
        "asyncio",
        "yaml",
        "sqlite3",
        "batchgate.config",
        "batchgate.quota",
        "batchgate.gateway",
        "batchgate.emulator.server",
        "uvloop",  # the serve extra: only `batchgate serve` loads it, when it starts its loop
    )
    assert loaded_after(code, watch) == []


def test_a_job_s_machinery_loads_no_tokenizer_display_or_schema_validator() -> None:
    code = "import batchgate.jobs.runner, batchgate.gateway, batchgate.emulator.server, batchgate.cli.run"
    assert loaded_after(code, HEAVY) == []


def test_metrics_load_only_for_a_run_that_asks_for_them() -> None:
    watch = ("prometheus_client", "aiohttp.web", "batchgate.observe.metrics")
    parsed = (
        "from batchgate.cli import build_parser\n"
        "args = build_parser().parse_args(['run', 'in.jsonl', '--config', 'c.yaml', '--output', 'o.jsonl',"
        " '--log-format', 'json'])\n"
        "from batchgate.cli.observing import logging_for\n"
        "with logging_for(args): pass"
    )
    assert loaded_after(parsed, watch) == []
    asked = "import batchgate.observe.exporter"
    assert loaded_after(asked, watch) == list(watch)


def test_opentelemetry_loads_only_for_a_run_that_traces() -> None:
    watch = ("opentelemetry", "opentelemetry.sdk", "batchgate.observe.tracing.spans")
    parse = (
        "from batchgate.cli import build_parser\n"
        "from batchgate.config import config_from_dict\n"
        "import batchgate.jobs.runner, batchgate.server.service\n"
        "config = config_from_dict({'providers': [{'name': 'a', 'kind': 'openai', 'base_url': 'http://x'}],"
        " 'routes': [{'model': 'm', 'targets': ['a']}]})\n"
        "argv = ['run', 'in.jsonl', '--config', 'c.yaml', '--output', 'o.jsonl'FLAG]\n"
        "args = build_parser().parse_args(argv)\n"
        "from batchgate.cli.observing import tracing_for\n"
        "with tracing_for(args, config): pass"
    )
    assert loaded_after(parse.replace("FLAG", ""), watch) == []
    assert loaded_after(parse.replace("FLAG", ", '--trace'"), watch) == list(watch)


def test_an_exact_counter_loads_its_encoding_on_the_first_count_without_the_wrapper() -> None:
    made = "from batchgate.tokens import ExactTokenCounter\ncounter = ExactTokenCounter.shared('o200k_base')"
    assert loaded_after(made, HEAVY) == []
    body = "{'messages': [{'role': 'user', 'content': 'hi'}]}"
    counted = f"{made}\nassert counter.count_prompt({body}) > 0"
    # the Rust tokenizer alone: bpe_openai's Python package (which decodes every encoding) stays out
    assert loaded_after(counted, HEAVY) == ["bpe_openai._bindings"]


def test_a_quiet_job_with_a_regex_check_imports_neither_rich_nor_jsonschema() -> None:
    code = (
        "from batchgate.jobs.checks.output_check import OutputCheck\n"
        "from batchgate.jobs.progress.counters import make_sink\n"
        "OutputCheck('yes|no', None, source='x')\n"
        "make_sink('quiet')"
    )
    assert loaded_after(code, ("rich", "jsonschema")) == []


def test_the_live_display_imports_rich_at_its_first_update_not_before_the_first_request() -> None:
    made = "from batchgate.jobs.progress.counters import make_sink\nsink = make_sink('rich')"
    told = f"{made}\nsink.event('started', job='j', pending=3, done=0)"
    assert loaded_after(told, ("rich",)) == []
    # a run that ends before the display's first update still prints its `started` line
    assert loaded_after(f"{told}\nsink.close()", ("rich",)) == ["rich"]


def test_the_library_s_gateway_loads_no_aiohttp() -> None:
    # chat calls go over the lean HTTP/1.1 client: aiohttp (~0.2 s) is for the Batch API, the
    # emulator and the server, loaded by those only
    code = (
        "from batchgate import Gateway, config_from_dict\n"
        "import batchgate.providers.base, batchgate.providers.classify, batchgate.providers.transport"
    )
    assert loaded_after(code, ("aiohttp",)) == []


def test_a_gateway_on_h1_starts_without_aiohttp_and_one_on_aiohttp_loads_it() -> None:
    # `transport: aiohttp` (providers.network.chat_transport) imports it lazily, when chosen
    def started(transport: str) -> str:
        return (
            "import asyncio\nfrom batchgate import Gateway, config_from_dict\n"
            "p = {'name': 'a', 'base_url': 'http://127.0.0.1:9/v1', 'api_key': 'k'}\n"
            f"s = {{'transport': {transport!r}}}\n"
            "c = config_from_dict({'providers': [p], 'routes': [{'model': 'm', 'targets': ['a']}],"
            " 'settings': s}, environ={})\n"
            "async def main() -> None:\n    async with Gateway(c): pass\n"
            "asyncio.run(main())"
        )

    assert loaded_after(started("h1"), ("aiohttp",)) == []
    assert loaded_after(started("aiohttp"), ("aiohttp",)) == ["aiohttp"]
