"""Bad input of every kind named by the issue: one clear line naming the file, line or key, a
non-zero exit, no traceback, nothing sent and nothing half-written."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import orjson
import pytest

from batchgate.emulator import EmulatorThread

from .harness import (
    MODEL,
    Cli,
    finish,
    gateway_config,
    ids_once,
    input_line,
    leftovers,
    one_error_line,
    provider_totals,
    read_jsonl,
    wait_for,
    write_input,
)

pytestmark = pytest.mark.acceptance


def _assert_untouched(cli: Cli, emu: EmulatorThread, out: Path) -> None:
    assert not out.exists()
    assert not Path(f"{out}.errors.jsonl").exists()
    assert not list(leftovers(cli.cwd))
    assert provider_totals(emu)["admitted"] == 0


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "missing.jsonl: no such file"),
        ("directory", "adir: is a directory"),
        ("empty", "empty.jsonl: the input is empty"),
        ("bad_utf8", "bad_utf8.jsonl:2: not valid UTF-8"),
        ("long_line", "long_line.jsonl:3: line is longer than"),
        ("unknown_route", "unknown_route.jsonl:2: unknown model 'no-such-model'"),
    ],
)
def test_bad_input_file(cli: Cli, emu: EmulatorThread, case: str, expected: str) -> None:
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    good = orjson.dumps(input_line(0)) + b"\n"
    path = cli.cwd / f"{case}.jsonl"
    if case == "directory":
        path = cli.cwd / "adir"
        path.mkdir()
    elif case == "empty":
        path.write_bytes(b"\n \n")
    elif case == "bad_utf8":
        path.write_bytes(good + good.replace(b"item-00000", b"item-\xff\xfe"))
    elif case == "long_line":
        pad = {
            "custom_id": "long",
            "model": MODEL,
            "messages": [{"role": "user", "content": "x" * 4_200_000}],
        }
        path.write_bytes(good + good.replace(b"item-00000", b"item-00001") + orjson.dumps(pad) + b"\n")
    elif case == "unknown_route":
        other = {"custom_id": "x", "model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}
        path.write_bytes(good + orjson.dumps(other) + b"\n")
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(path.name), "--config", str(cfg), "--output", str(out))
    assert done.returncode == 2
    assert expected in one_error_line(done.stderr)
    _assert_untouched(cli, emu, out)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_input(cli: Cli, emu: EmulatorThread) -> None:
    src = write_input(cli.cwd / "in.jsonl", 3)
    src.chmod(0)
    out = cli.cwd / "out.jsonl"
    done = cli.run(
        "run", str(src), "--config", str(gateway_config(cli.cwd / "gw.yaml", emu)), "--output", str(out)
    )
    assert done.returncode == 2
    assert "in.jsonl: cannot open" in one_error_line(done.stderr)
    _assert_untouched(cli, emu, out)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "missing.yaml: file not found"),
        ("yaml", "broken.yaml: line 2: invalid YAML"),
        ("bad_key", "bad_key.yaml: settings.concurency"),
        (
            "unset_key_var",
            "providers[0].api_key_env: environment variable BATCHGATE_TEST_UNSET_KEY is not set",
        ),
    ],
)
def test_bad_config(cli: Cli, emu: EmulatorThread, case: str, expected: str) -> None:
    src = write_input(cli.cwd / "in.jsonl", 3)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    path = cli.cwd / "missing.yaml"
    if case == "yaml":
        path = cli.cwd / "broken.yaml"
        path.write_text("providers: [\n  - {name: a\n", encoding="utf-8")
    elif case == "bad_key":
        path = cli.cwd / "bad_key.yaml"
        path.write_text(
            cfg.read_text(encoding="utf-8").replace("concurrency:", "concurency:"), encoding="utf-8"
        )
    elif case == "unset_key_var":
        path = cli.cwd / "keyed.yaml"
        text = cfg.read_text(encoding="utf-8")
        path.write_text(text.replace("kind: openai", "kind: openai\n  api_key_env: BATCHGATE_TEST_UNSET_KEY"))
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(path), "--output", str(out))
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert expected in line
    _assert_untouched(cli, emu, out)


@pytest.mark.slow  # several CLI runs
def test_output_that_cannot_be_written(cli: Cli, emu: EmulatorThread) -> None:
    src = write_input(cli.cwd / "in.jsonl", 3)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(cli.cwd / "nodir" / "out.jsonl"))
    assert done.returncode == 2
    assert "nodir/out.jsonl: cannot write output: directory" in one_error_line(done.stderr)
    (cli.cwd / "adir").mkdir()
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(cli.cwd / "adir"))
    assert done.returncode == 2
    assert "adir: cannot write output: it is a directory" in one_error_line(done.stderr)
    assert provider_totals(emu)["admitted"] == 0


@pytest.mark.slow  # several CLI runs
def test_malformed_and_duplicate_lines_fail_first_unless_skipped(cli: Cli, emu: EmulatorThread) -> None:
    lines = [orjson.dumps(input_line(i)) for i in range(6)]
    lines[2] = b'{"custom_id": "broken", "model": '
    lines[4] = orjson.dumps(input_line(1))  # a duplicate of line 2's custom_id
    src = cli.cwd / "in.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "in.jsonl:3: invalid JSON" in done.stderr  # the error line names the first bad line
    assert "in.jsonl:5: duplicate custom_id 'item-00001' (first on line 2)" in done.stderr
    assert "nothing was sent" in done.stderr
    _assert_untouched(cli, emu, out)

    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--skip-invalid", "-q")
    assert done.returncode == 0, done.stderr
    assert ids_once(read_jsonl(out)) == {"item-00000", "item-00001", "item-00003", "item-00005"}


@pytest.mark.slow  # several CLI runs
def test_locked_job_status_from_another_terminal_and_sigterm(cli: Cli, emu: EmulatorThread) -> None:
    src = write_input(cli.cwd / "in.jsonl", 400)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, concurrency=2)  # ~20 items/s: long enough
    out = cli.cwd / "out.jsonl"
    command = ("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
    proc = cli.start(*command)
    # The live figures are a snapshot: the first one can come before the first request leaves,
    # so wait for one that shows a request at the provider.
    wait_for(
        lambda: ((cli.try_status() or {}).get("live") or {}).get("in_flight", 0) >= 1,
        "the running job's live figures with a request in flight",
    )
    status = cli.status()
    assert status["state"] == "running"
    assert status["total"] == 400
    assert status["live"]["providers"]

    second = cli.run(*command)
    assert second.returncode == 2
    line = one_error_line(second.stderr)
    assert f"is locked by another batchgate run (pid {proc.pid})" in line
    assert "lock file" in line

    code, _, stderr = finish(proc, signal.SIGTERM)
    assert code == 130, stderr
    assert "interrupted by SIGTERM" in stderr
    assert "resume with" in stderr
    status = cli.status()
    assert status["state"] == "stopped"
    assert status["succeeded"] == len(read_jsonl(out))
    assert provider_totals(emu)["completed"] == status["succeeded"]
