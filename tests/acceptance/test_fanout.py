"""`batchgate run --fanout`: every line on each route, one joined line per input, routes compared."""

from __future__ import annotations

import orjson
import pytest
import yaml

from batchgate.emulator import EmulatorThread, embedding_vector

from .graph_harness import ROUTES, graph_config
from .harness import (
    Cli,
    expected_ids,
    ids_once,
    input_line,
    one_error_line,
    provider_totals,
    read_jsonl,
    write_input,
)

pytestmark = pytest.mark.acceptance


@pytest.mark.slow  # several CLI runs
def test_fanout_writes_one_joined_line_per_input_with_one_answer_per_route(
    cli: Cli, emu: EmulatorThread
) -> None:
    n = 60
    src = write_input(cli.cwd / "in.jsonl", n, lambda i: ("positive", "negative", "neutral")[i % 3])
    cfg = graph_config(cli.cwd / "gw.yaml", emu)
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--fanout", ",".join(ROUTES),
                   "--progress", "quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out)
    assert len(rows) == n
    assert ids_once(rows) == expected_ids(n)
    stats = emu.stats()["providers"]
    assert (stats["alpha"]["admitted"], stats["gamma"]["admitted"]) == (n, n)  # each line once per route
    assert provider_totals(emu)["duplicates"] == 0
    for row in rows:
        assert set(row["answers"]) == set(ROUTES)
        answers = [row["answers"][r] for r in ROUTES]
        assert all(a["status"] == "succeeded" and a["answer"] for a in answers), row
        assert [a["provider"] for a in answers] == ["alpha", "gamma"]
        assert all(
            a["usage"]["total_tokens"] > 0 and a["latency_ms"] > 0 and a["cost_usd"] > 0 for a in answers
        )
        assert row["agreement"] == 1.0  # the emulator labels a prompt the same on every provider
    mood = {f"item-{i:05d}": ("positive", "negative", "neutral")[i % 3] for i in range(n)}
    assert all(row["answers"]["r-alpha"]["answer"] == mood[row["custom_id"]] for row in rows)
    job = cli.status()["job"]
    section = cli.report(job)["graph"]
    assert section["kind"] == "fanout"
    for route in ROUTES:
        step = section["steps"][route]
        assert (step["sent"], step["succeeded"], step["failed"]) == (n, n, 0)
        assert step["latency_ms"]["p50"] > 0
        assert step["cost_usd"] > 0
        assert step["prompt_tokens"] > 0
    assert section["agreement"]["r-alpha"]["gamma-3.5"] == 1.0
    assert "routes compared" in done.stderr
    resumed = cli.run("resume", job, "-q")  # the job remembers its fan-out (a route name with a dot too)
    assert resumed.returncode == 0, resumed.stderr
    assert emu.stats()["providers"]["gamma"]["admitted"] == n  # nothing left to send
    assert read_jsonl(out) == rows


def test_fanout_config_list_and_an_unknown_route(cli: Cli, emu: EmulatorThread) -> None:
    src = write_input(cli.cwd / "in.jsonl", 6)
    cfg = graph_config(cli.cwd / "gw.yaml", emu)
    bad = cli.run("run", str(src), "--config", str(cfg), "--output", "o.jsonl", "--fanout", "r-alpha,nope")
    assert bad.returncode == 2
    assert "unknown route 'nope'" in one_error_line(bad.stderr)
    assert provider_totals(emu)["admitted"] == 0
    cfg.write_text(cfg.read_text(encoding="utf-8") + "fanout: [r-alpha, gamma-3.5]\n", encoding="utf-8")
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "o.jsonl", "--progress", "quiet")
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(cli.cwd / "o.jsonl")
    assert len(rows) == 6
    assert all(set(r["answers"]) == set(ROUTES) for r in rows)


def test_fanout_lines_need_no_model_and_a_given_one_is_ignored(cli: Cli, emu: EmulatorThread) -> None:
    src = cli.cwd / "in.jsonl"
    lines = [input_line(i) for i in range(6)]  # the three input shapes, each with and without a model
    for i, line in enumerate(lines):
        request = line.get("body") or line.get("params") or line
        if i < 3:
            del request["model"]  # optional with --fanout
        else:
            request["model"] = "no-such-model"  # ignored: each route sets its own
    src.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    cfg = graph_config(cli.cwd / "gw.yaml", emu)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "o.jsonl", "--fanout", ",".join(ROUTES),
                   "--progress", "quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(cli.cwd / "o.jsonl")
    assert len(rows) == 6
    assert all(a["status"] == "succeeded" for r in rows for a in r["answers"].values()), rows
    stats = emu.stats()["providers"]
    assert (stats["alpha"]["admitted"], stats["gamma"]["admitted"]) == (6, 6)


def test_a_fanout_of_embeddings_lines_keeps_each_route_s_vectors(cli: Cli, emu: EmulatorThread) -> None:
    cfg = graph_config(cli.cwd / "gw.yaml", emu)
    data = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    data["routes"] += [
        {"model": "small", "targets": ["alpha:text-embedding-3-small"]},
        {"model": "large", "targets": ["alpha:text-embedding-3-large"]},
    ]
    cfg.write_text(yaml.safe_dump(data), encoding="utf-8")
    texts = {"one": "the cat sat", "two": ["a dog barked", "the cat sat"]}
    lines = [
        {
            "custom_id": cid,
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"input": text, "dimensions": 8},
        }
        for cid, text in texts.items()
    ]
    src = cli.cwd / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--fanout", "small,large",
                   "--progress", "quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {row["custom_id"]: row for row in read_jsonl(out)}
    for cid, text in texts.items():
        want = [embedding_vector(t, 8) for t in ([text] if isinstance(text, str) else text)]
        for route in ("small", "large"):
            answer = rows[cid]["answers"][route]
            assert answer["status"] == "succeeded"
            assert answer["embeddings"] == want, (cid, route)
            assert answer["usage"]["prompt_tokens"] > 0
