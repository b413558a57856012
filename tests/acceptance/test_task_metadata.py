"""Per-task metadata: an input line's fields that are not request fields (a batch line's other
top-level fields, a plain line's `metadata`) are kept with the task, written back on its OUT line
and in the errors file, shown where reports show tasks, and never sent: the providers here refuse
a body carrying them (400 `unknown_parameter`, as strict providers do)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.jobs.store.sqlite import SqliteJobStore
from batchgate.request_fields import TASK_METADATA
from batchgate.web.job_page import failures

from .graph_harness import ROUTES, graph_config
from .harness import Cli, gateway_config, input_line, read_jsonl
from .test_batch_api import write_config

pytestmark = pytest.mark.acceptance
REFUSED = ["metadata", "bizObjectId", "tags", "user", TASK_METADATA]  # nothing of the metadata is sent


@pytest.fixture
def strict() -> Iterator[EmulatorThread]:
    """Both providers refuse the metadata fields, live and in their Batch APIs."""
    latency = {"ttft_p50_ms": 20, "ttft_sigma": 0.1, "per_token_ms": 0}
    providers = [
        {"name": "alpha", "family": "openai", "limits": {"rpm": 10**6, "tpm": 10**8}},
        {"name": "gamma", "family": "anthropic", "limits": {"rpm": 10**6, "itpm": 10**8, "otpm": 10**8}},
    ]
    for p in providers:
        p |= {"latency": latency, "reject_fields": REFUSED, "batch": {"processing_seconds": 0.5}}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 1, "providers": providers}))
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


def _with_metadata(i: int) -> dict[str, Any]:
    line = input_line(i)  # by turn: OpenAI Batch, Anthropic batch, plain
    if "body" in line or "params" in line:
        line |= {"bizObjectId": f"biz-{i}", "tags": ["a", i]}
    else:
        line["metadata"] = {"bizObjectId": f"biz-{i}", "n": i}
    return line


def _expected(i: int) -> dict[str, Any]:
    if i % 3 == 2:
        return {"metadata": {"bizObjectId": f"biz-{i}", "n": i}}
    return {"bizObjectId": f"biz-{i}", "tags": ["a", i]}


@pytest.mark.slow
async def test_metadata_is_kept_written_back_and_never_sent(cli: Cli, strict: EmulatorThread) -> None:
    n = 9
    lines = [_with_metadata(i) for i in range(n)]
    lines[3]["body"]["user"] = "u-1"  # a request field the provider refuses: this task fails
    src = cli.cwd / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    cfg = gateway_config(cli.cwd / "gw.yaml", strict, max_attempts=1)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "out.jsonl", "-q")
    assert done.returncode == 4, done.stderr
    rows = {r["custom_id"]: r for r in read_jsonl(cli.cwd / "out.jsonl")}
    for i in range(n):
        row = rows[f"item-{i:05d}"]
        assert {k: row[k] for k in _expected(i)} == _expected(i), row  # written back as given
        assert (row["error"] is None) == (i != 3), row
    stats = strict.stats()["providers"]
    refused = sum(sum(p["rejected"].values()) for p in stats.values())
    assert refused == 1  # only the line with `user`: no metadata reached a provider

    (failed,) = read_jsonl(cli.cwd / "out.jsonl.errors.jsonl")
    assert (failed["custom_id"], failed["bizObjectId"], failed["tags"]) == ("item-00003", "biz-3", ["a", 3])
    del failed["body"]["user"]
    fixed = cli.cwd / "fixed.jsonl"
    fixed.write_bytes(orjson.dumps(failed) + b"\n")  # the errors file, fed back as input
    again = cli.run("run", str(fixed), "--config", str(cfg), "--output", "fixed.out.jsonl", "-q")
    assert again.returncode == 0, again.stderr
    (row,) = read_jsonl(cli.cwd / "fixed.out.jsonl")
    assert (row["error"], row["bizObjectId"], row["tags"]) == (None, "biz-3", ["a", 3])

    store = await SqliteJobStore.open(cli.store)
    try:
        job = next(j for j in await store.list_jobs() if j.output_path.endswith("/out.jsonl"))
        shown = (await failures(store, job.job_id))["first"]  # the job page and `report --html`
    finally:
        await store.close()
    assert shown[0]["metadata"] == {"bizObjectId": "biz-3", "tags": ["a", 3]}


def test_batch_api_mode_keeps_metadata_off_the_batch_file(cli: Cli, strict: EmulatorThread) -> None:
    n = 6
    src = cli.cwd / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(_with_metadata(i)) + b"\n" for i in range(n)))
    cfg = write_config(cli.cwd / "gw.yaml", strict)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "o.jsonl", "--mode", "batch-api", "-q")
    assert done.returncode == 0, done.stderr
    assert strict.stats()["providers"]["alpha"]["batches"]["requests_succeeded"] == n  # none refused
    for row in read_jsonl(cli.cwd / "o.jsonl"):
        i = int(row["custom_id"][5:])
        assert {k: row[k] for k in _expected(i)} == _expected(i), row


def test_a_fanout_line_keeps_its_metadata(cli: Cli, strict: EmulatorThread) -> None:
    src = cli.cwd / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(_with_metadata(i)) + b"\n" for i in range(3)))
    cfg = graph_config(cli.cwd / "gw.yaml", strict)  # each route's request without the metadata
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "o.jsonl", "--fanout", ",".join(ROUTES),
                   "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    for row in read_jsonl(cli.cwd / "o.jsonl"):
        i = int(row["custom_id"][5:])
        assert {k: row[k] for k in _expected(i)} == _expected(i), row


def test_a_line_whose_metadata_clashes_with_the_output_line_is_refused(cli: Cli, emu: EmulatorThread) -> None:
    line = input_line(0) | {"usage": "mine"}
    src = cli.cwd / "in.jsonl"
    src.write_bytes(orjson.dumps(line) + b"\n")
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "o.jsonl", "-q")
    assert done.returncode != 0
    assert "top-level field 'usage' would clash with the output line's own" in done.stderr
    assert "Traceback" not in done.stderr
