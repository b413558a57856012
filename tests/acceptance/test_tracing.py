"""`batchgate run --trace` as a user runs it (a subprocess) with `OTEL_EXPORTER_OTLP_ENDPOINT` at a
real OTLP/HTTP receiver on loopback (`tests/otlp.py`): every request's span arrives under the job's
span, with its route's target, tokens and cost (a failover's attempts as its children, each with
its status and the error that made it retry), and a provider batch's span too; the config's
`tracing:` turns it on the same;
asking for tracing without it is a one-line error naming the key."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from acceptance.harness import MODEL, Cli, gateway_config, read_jsonl, write_input
from acceptance.test_batch_api import batch_emulator, command, write_config
from batchgate.emulator import EmulatorThread
from otlp import otlp_receiver
from reliability import helpers as rel
from reliability.helpers import gw_provider, start_emulator
from reliability.helpers import write_config as rel_config

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

N = 12


def _run(cli: Cli, emu: EmulatorThread, *extra: str, tracing: object = None) -> tuple[Path, str]:
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    if tracing is not None:
        data = yaml.safe_load(cfg.read_text())
        cfg.write_text(yaml.safe_dump({**data, "tracing": tracing}))
    src, out = write_input(cli.cwd / "in.jsonl", N), cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q", *extra)
    assert done.returncode == 0, done.stderr
    return out, done.stderr


@pytest.mark.parametrize("how", ["flag", "config"])
def test_run_exports_a_span_per_request_under_its_jobs(cli: Cli, emu: EmulatorThread, how: str) -> None:
    with otlp_receiver() as receiver:
        cli.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        cli.env["OTEL_SERVICE_NAME"] = "batchgate-test"
        if how == "flag":
            out, _ = _run(cli, emu, "--trace")
        else:
            out, _ = _run(cli, emu, tracing={"enabled": True})
        # the run flushes its spans before it exits: nothing to wait for
        requests = receiver.named(f"chat {MODEL}")
        (job,) = receiver.named("job")
    assert len(read_jsonl(out)) == N
    assert len(requests) == N
    assert {s.trace_id for s in requests} == {job.trace_id}
    assert {s.parent_span_id for s in requests} == {job.span_id}
    assert job.parent_span_id == ""
    assert job.attributes["batchgate.job"]
    assert {s.service for s in [*requests, job]} == {"batchgate-test"}
    for span in requests:
        a = span.attributes
        assert a["batchgate.target"] in ("alpha", "gamma")
        assert a["gen_ai.usage.input_tokens"] > 0
        assert a["gen_ai.usage.output_tokens"] > 0
        assert a["batchgate.cost_usd"] > 0  # priced by the config's table
        assert a.get("batchgate.attempts", 1) >= 1  # left out for the usual one
        assert "batchgate.quota_wait_ms" in a
        assert str(a["batchgate.custom_id"]).startswith("item-")
        assert not span.error


def test_tracing_off_exports_nothing(cli: Cli, emu: EmulatorThread) -> None:
    with otlp_receiver() as receiver:
        cli.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        _run(cli, emu)
        assert receiver.posts == 0


def test_a_bad_tracing_key_is_one_line_naming_it(cli: Cli, emu: EmulatorThread) -> None:
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    cfg.write_text(yaml.safe_dump({**yaml.safe_load(cfg.read_text()), "tracing": {"enabled": "yes"}}))
    src = write_input(cli.cwd / "in.jsonl", 1)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(cli.cwd / "o.jsonl"))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.strip()]
    assert "tracing.enabled" in line
    assert "gw.yaml" in line


def test_a_provider_batch_has_its_span_under_the_jobs(cli: Cli) -> None:
    emu = batch_emulator()
    try:
        cfg = write_config(cli.cwd / "gw.yaml", emu)
        with otlp_receiver() as receiver:
            cli.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
            done = cli.run(*command(cli, 5, cfg, "-q", "--trace"))
            assert done.returncode == 0, done.stderr
            (batch,) = receiver.named("provider batch")
            (job,) = receiver.named("job")
    finally:
        emu.stop()
    assert batch.trace_id == job.trace_id
    assert batch.parent_span_id == job.span_id
    a = batch.attributes
    assert a["batchgate.target"] == "alpha"
    assert a["batchgate.batch_requests"] == 5
    assert a["batchgate.batch_state"] == "completed"
    assert a["batchgate.batch_succeeded"] == 5
    assert str(a["batchgate.batch_id"]).startswith("batch_")
    assert not batch.error


def test_a_failover_reaches_the_receiver_with_each_attempt(cli: Cli) -> None:
    emu = start_emulator([rel.emu_provider("down", faults={"server_error": 1.0}), rel.emu_provider("up")])
    try:
        providers = [gw_provider(emu, "down"), gw_provider(emu, "up")]
        cfg = rel_config(cli.cwd / "gw.yaml", providers, concurrency=2, max_attempts=6, hedge=False)
        src = rel.write_input(cli.cwd / "in.jsonl", 8)
        with otlp_receiver() as receiver:
            cli.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
            out = str(cli.cwd / "o.jsonl")
            done = cli.run("run", str(src), "--config", str(cfg), "--output", out, "-q", "--trace")
            assert done.returncode == 0, done.stderr
            requests = receiver.named(f"chat {rel.MODEL}")
            attempts = receiver.named("attempt")
    finally:
        emu.stop()
    assert len(requests) == 8
    assert all(r.attributes["batchgate.target"] == "up" for r in requests)
    failed_over = [r for r in requests if r.attributes.get("batchgate.attempts", 1) > 1]
    assert failed_over, "down fails every call: some request must have tried it first"
    for request in failed_over:
        mine = [a for a in attempts if a.parent_span_id == request.span_id]
        assert len(mine) == request.attributes["batchgate.attempts"]
        assert {a.trace_id for a in mine} == {request.trace_id}
        causes = sorted((a.attributes["batchgate.attempt"], a.attributes.get("error.type")) for a in mine)
        *retried, (_, last) = causes
        assert last is None  # the answered one
        assert {cause for _, cause in retried} == {"server_error"}  # why each was retried
        assert all(a.error for a in mine if a.attributes.get("error.type"))


def test_a_collector_that_is_down_costs_the_run_one_line(cli: Cli, emu: EmulatorThread) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cli.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
    out, stderr = _run(cli, emu, "--trace")
    assert len(read_jsonl(out)) == N  # the run itself is whole
    said = [line for line in stderr.splitlines() if "span" in line]
    tail = "spans could not be exported (is the OTLP collector up? OTEL_EXPORTER_OTLP_ENDPOINT)"
    assert said == [f"batchgate: {N + 1} {tail}"]  # the requests' and the job's
    assert "Traceback" not in stderr
