"""`batchgate run` on a batch file mixing the four OpenAI endpoints (issue 29): one output line per
input in its endpoint's own shape, each embedding the emulator's vector of its text, usage and cost
per endpoint (embeddings priced on input only), and lines an endpoint cannot take refused at
validation, naming the line and the field, before anything is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchgate.emulator import EmulatorThread, embedding_vector
from batchgate.tokens import ExactTokenCounter

from .harness import Cli, provider_totals, read_jsonl

pytestmark = pytest.mark.acceptance

SENTIMENT = "Classify the sentiment of this review: awful, broken on day one"
TEXTS = ["the cat sat on the mat", "a dog barked", "the cat sat on the mat"]


def _config(path: Path, emu: EmulatorThread, job: dict[str, Any] | None = None) -> Path:
    data: dict[str, Any] = {
        "providers": [
            {"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha")},
            {"name": "gamma", "kind": "anthropic", "base_url": emu.base_url("gamma")},
        ],
        "routes": [
            {"model": "writer", "targets": ["alpha:gpt-4o-mini"]},
            {"model": "embed", "targets": ["alpha:text-embedding-3-small"]},
            {"model": "either", "targets": ["alpha:text-embedding-3-small", "gamma:claude-3-5-haiku-latest"]},
            {"model": "claude", "targets": ["gamma:claude-3-5-haiku-latest"]},
        ],
        "settings": {"retry": {"max_attempts": 2, "base_delay": 0.05, "max_delay": 0.2}},
        "prices": {
            # large prices, so the report's rounding to the micro-dollar does not hide a token
            "gpt-4o-mini": {"input": 150.0, "output": 600.0},
            "text-embedding-3-small": {"input": 20.0, "output": 0.0},
            "claude-3-5-haiku-latest": {"input": 0.80, "output": 4.00},
        },
    }
    if job:
        data["job"] = job
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _line(custom_id: str, url: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


MIXED = [
    _line(
        "chat",
        "/v1/chat/completions",
        {"model": "writer", "max_tokens": 5, "messages": [{"role": "user", "content": SENTIMENT}]},
    ),
    _line("emb-one", "/v1/embeddings", {"model": "embed", "input": TEXTS[0]}),
    _line("emb-many", "/v1/embeddings", {"model": "embed", "input": TEXTS, "dimensions": 16}),
    _line("resp", "/v1/responses", {"model": "writer", "input": SENTIMENT, "max_output_tokens": 20}),
    _line("cmpl", "/v1/completions", {"model": "writer", "prompt": SENTIMENT, "max_tokens": 10}),
]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


@pytest.mark.slow
def test_a_file_mixing_all_four_endpoints_answers_each_in_its_shape(cli: Cli, emu: EmulatorThread) -> None:
    cfg = _config(cli.cwd / "gw.yaml", emu)
    src = _write(cli.cwd / "in.jsonl", MIXED)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "out.jsonl", "--progress", "quiet")
    assert done.returncode == 0, done.stderr
    rows = {row["custom_id"]: row for row in read_jsonl(cli.cwd / "out.jsonl")}
    assert sorted(rows) == sorted(line["custom_id"] for line in MIXED)
    body = {cid: row["response"]["body"] for cid, row in rows.items()}
    assert body["chat"]["object"] == "chat.completion"
    assert body["chat"]["choices"][0]["message"]["content"] == "negative"
    assert body["resp"]["object"] == "response"
    assert body["resp"]["status"] == "completed"
    assert body["resp"]["output"][0]["content"][0]["text"] == "negative"
    assert body["cmpl"]["object"] == "text_completion"
    assert body["cmpl"]["choices"][0]["text"] == "negative"
    assert body["emb-one"]["object"] == "list"
    assert [d["embedding"] for d in body["emb-one"]["data"]] == [embedding_vector(TEXTS[0], 1536)]
    assert [d["embedding"] for d in body["emb-many"]["data"]] == [embedding_vector(t, 16) for t in TEXTS]
    count = ExactTokenCounter().count_text
    many = sum(count(t) for t in TEXTS)
    assert rows["emb-many"]["usage"]["prompt_tokens"] == many
    assert rows["emb-many"]["usage"]["completion_tokens"] == 0
    assert rows["resp"]["usage"]["completion_tokens"] == 1
    report = cli.report(cli.status()["job"])
    assert (report["success_count"], report["failed_count"]) == (5, 0)
    price = {"embed": (20.0, 0.0), "writer": (150.0, 600.0)}  # per million tokens, from the config
    lines = {line["custom_id"]: line["body"]["model"] for line in MIXED}
    spent = sum(
        rows[cid]["usage"]["prompt_tokens"] * price[m][0]
        + rows[cid]["usage"]["completion_tokens"] * price[m][1]
        for cid, m in lines.items()
    )
    assert report["cost_usd"] == pytest.approx(spent / 1e6, rel=1e-4)
    # tokens charged at the provider: embeddings by input only, responses by max_output_tokens
    charged = emu.stats()["providers"]["alpha"]["tokens_charged"]
    assert charged["output"] == 5 + 20 + 10


def test_a_line_an_endpoint_cannot_take_is_refused_before_anything_is_sent(
    cli: Cli, emu: EmulatorThread
) -> None:
    cfg = _config(cli.cwd / "gw.yaml", emu)
    bad = [
        _line("to-anthropic", "/v1/embeddings", {"model": "either", "input": "x"}),
        _line("too-many", "/v1/embeddings", {"model": "embed", "input": ["x"] * 2049}),
        _line("no-input", "/v1/responses", {"model": "writer", "instructions": "be brief"}),
        _line("no-prompt", "/v1/completions", {"model": "writer", "max_tokens": 5}),
        _line("moderation", "/v1/moderations", {"model": "writer", "input": "x"}),
        *MIXED,
    ]
    src = _write(cli.cwd / "in.jsonl", bad)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "out.jsonl", "--progress", "quiet")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = [line.removeprefix(f"{cli.cwd}/") for line in done.stderr.splitlines()]
    gamma = "route 'either' has target 'gamma' (anthropic), which does not serve it"
    assert f"in.jsonl:1: url /v1/embeddings: {gamma}" in lines
    assert "in.jsonl:2: input holds 2049 items; at most 2048 in one request" in lines
    assert any(
        line.startswith("in.jsonl:3: input must be a non-empty string or list of items") for line in lines
    )
    assert any(line.startswith("in.jsonl:4: prompt must be a non-empty string") for line in lines)
    assert any(line.startswith("in.jsonl:5: url must be one of /v1/chat/completions") for line in lines)
    assert provider_totals(emu)["admitted"] == 0


@pytest.mark.slow
def test_the_batch_api_mode_submits_one_batch_per_endpoint(cli: Cli, emu: EmulatorThread) -> None:
    poll = {"initial": 0.2, "factor": 1.5, "maximum": 1}
    cfg = _config(cli.cwd / "gw.yaml", emu, job={"batch_poll": poll})
    src = _write(cli.cwd / "in.jsonl", MIXED)
    args = ("--output", "out.jsonl", "--progress", "quiet", "--mode", "batch-api")
    done = cli.run("run", str(src), "--config", str(cfg), *args)
    assert done.returncode == 0, done.stderr
    stats = emu.stats()["providers"]["alpha"]
    # chat, responses and completions of route writer, embeddings of route embed: 4 batches
    assert (stats["batches"]["created"], stats["batches"]["completed"]) == (4, 4)
    assert provider_totals(emu)["admitted"] == 0  # nothing went live
    rows = {row["custom_id"]: row for row in read_jsonl(cli.cwd / "out.jsonl")}
    assert sorted(rows) == sorted(line["custom_id"] for line in MIXED)
    body = {cid: row["response"]["body"] for cid, row in rows.items()}
    shapes = {cid: b["object"] for cid, b in body.items()}
    assert shapes == {
        "chat": "chat.completion",
        "emb-one": "list",
        "emb-many": "list",
        "resp": "response",
        "cmpl": "text_completion",
    }
    assert body["resp"]["output"][0]["content"][0]["text"] == "negative"
    assert [d["embedding"] for d in body["emb-many"]["data"]] == [embedding_vector(t, 16) for t in TEXTS]
    assert rows["emb-many"]["usage"]["completion_tokens"] == 0
    assert rows["resp"]["usage"]["completion_tokens"] == 1
    report = cli.report(cli.status()["job"])
    assert (report["success_count"], report["failed_count"]) == (5, 0)
    price = {"embed": (20.0, 0.0), "writer": (150.0, 600.0)}  # per million tokens, from the config
    lines = {line["custom_id"]: line["body"]["model"] for line in MIXED}
    spent = sum(
        rows[cid]["usage"]["prompt_tokens"] * price[m][0]
        + rows[cid]["usage"]["completion_tokens"] * price[m][1]
        for cid, m in lines.items()
    )
    assert report["cost_usd"] == pytest.approx(0.5 * spent / 1e6, rel=1e-4)  # the Batch API's half price


def test_an_output_check_reads_the_text_answers_and_leaves_vectors_alone(
    cli: Cli, emu: EmulatorThread
) -> None:
    cfg = _config(cli.cwd / "gw.yaml", emu, job={"validate_regex": "^(positive|negative|neutral)$"})
    src = _write(cli.cwd / "in.jsonl", MIXED)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "out.jsonl", "--progress", "quiet")
    assert done.returncode == 0, done.stderr
    rows = {row["custom_id"]: row for row in read_jsonl(cli.cwd / "out.jsonl")}
    assert all(row["error"] is None for row in rows.values()), rows
    assert rows["emb-one"]["response"]["body"]["object"] == "list"


ANTHROPIC = [
    _line(
        "chat",
        "/v1/chat/completions",
        {"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": SENTIMENT}]},
    ),
    _line(
        "resp",
        "/v1/responses",
        {"model": "claude", "instructions": "One word.", "input": SENTIMENT, "max_output_tokens": 20},
    ),
]


def test_a_responses_line_and_a_chat_line_to_anthropic_answer_in_their_own_shapes(
    cli: Cli, emu: EmulatorThread
) -> None:
    cfg = _config(cli.cwd / "gw.yaml", emu)
    src = _write(cli.cwd / "in.jsonl", ANTHROPIC)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "out.jsonl", "--progress", "quiet")
    assert done.returncode == 0, done.stderr
    rows = {row["custom_id"]: row for row in read_jsonl(cli.cwd / "out.jsonl")}
    chat, resp = rows["chat"]["response"]["body"], rows["resp"]["response"]["body"]
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["content"] == "negative"
    assert (resp["object"], resp["status"]) == ("response", "completed")
    assert resp["output"][0]["content"][0] == {"type": "output_text", "text": "negative", "annotations": []}
    assert resp["usage"]["input_tokens"] == rows["resp"]["usage"]["prompt_tokens"] > 0
    assert resp["usage"]["output_tokens"] == rows["resp"]["usage"]["completion_tokens"] > 0
    assert provider_totals(emu)["admitted"] == 2


def test_a_responses_field_messages_cannot_express_is_refused_before_anything_is_sent(
    cli: Cli, emu: EmulatorThread
) -> None:
    cfg = _config(cli.cwd / "gw.yaml", emu)
    tools = _line(
        "tools", "/v1/responses", {"model": "claude", "input": "x", "tools": [{"type": "web_search"}]}
    )
    item = {"type": "function_call_output", "call_id": "c1", "output": "4"}
    call = _line("call", "/v1/responses", {"model": "claude", "input": [item]})
    src = _write(cli.cwd / "in.jsonl", [*ANTHROPIC, tools, call])
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "out.jsonl", "--progress", "quiet")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = [line.removeprefix(f"{cli.cwd}/") for line in done.stderr.splitlines()]
    route = "url /v1/responses: route 'claude' has target 'gamma' (anthropic)"
    where = f"{route}: cannot translate to Anthropic Messages"
    assert f"in.jsonl:3: {where}: field 'tools' has no Messages equivalent" in lines, lines
    assert (
        f"in.jsonl:4: {where}: input[0].type 'function_call_output' (only message items translate)" in lines
    )
    assert provider_totals(emu)["admitted"] == 0
