"""A hostile tenant, fuzzed: schemathesis (its CLI, as a user runs it) drives every operation of
the server's `/openapi.json` under a tenant's key, in all its phases — the documented examples,
the coverage of each schema's edges, random fuzzing, and stateful chains that follow the
document's links (create → get / cancel / pause / results with the id the server answered). No
answer may be a 5xx; and the server — run with an audit hook (`audited.py`) — may open no file
outside its data folder and its code, connect to nothing but the emulator it is configured with,
and start no process (issue 27) — from the moment it listens: what it does while starting (its
config, its stores, the worker process that parses large batches off the loop, issue 40) no
tenant's request can steer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import httpx
import pytest

from batchgate.emulator import EmulatorThread

from .harness import Server, _env, gateway_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]
if os.environ.get("CI") != "true":
    pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra")

AUDITED = Path(__file__).with_name("audited.py")
MAX_EXAMPLES = 12  # per operation and phase: the whole run stays near a minute
MAX_STEPS = 20  # per stateful scenario
PHASES = "examples,coverage,fuzzing,stateful"
# Read-only files any Python process may open (time zones, the resolver's, MIME types, CA roots).
SYSTEM_READS = ("/etc/", "/usr/share/", "/usr/lib/ssl/", "/dev/urandom", "/dev/null", "/proc/")


def _start(root: Path, config: Path, events: Path) -> Server:
    log = root / "server.log"
    argv = [sys.executable, str(AUDITED), str(events), "serve", "--config", str(config), "--port", "0",
            "--store", str(root / "data" / "jobs.db")]  # fmt: skip
    with log.open("a") as err:
        env = {**_env(), "XDG_CACHE_HOME": str(root / "cache")}  # the machine's quota ledger, configured here
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # blocks until the server listens (or exits)
    if "listening on " not in first:
        proc.kill()
        raise AssertionError(f"the server did not start: {first!r}\n{log.read_text()}")
    return Server(first.split("listening on ", 1)[1].strip(), root / "data", proc, log)


def _since_listening(events: Path, start: int) -> tuple[list[str], tuple[str, ...]]:
    """The audit lines written after the server listened (`start`: the file's size then), and
    the temporary folders it made before (multiprocessing's, removed again at its exit)."""
    with events.open("rb") as f:
        before = f.read(start).decode("utf-8").splitlines()
        after = f.read().decode("utf-8").splitlines()
    temp = tempfile.gettempdir().rstrip("/") + "/pymp-"
    seen = (line.partition("\t")[2].strip("'") for line in before)  # opens, and the forkserver's socket
    made = {temp + what[len(temp) :].split("/")[0] for what in seen if what.startswith(temp)}
    return after, tuple(sorted(os.path.realpath(d) for d in made))


def _schemathesis(server: Server, key: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    settings = cwd / "schemathesis.toml"
    settings.write_text(f"[phases.stateful]\nmax-steps = {MAX_STEPS}\n", encoding="utf-8")
    argv = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(settings),
        "run", server.url + "/openapi.json",
        "--header", f"Authorization: Bearer {key}",
        "--phases", PHASES, "--checks", "not_a_server_error",
        "--max-examples", str(MAX_EXAMPLES), "--seed", "27", "--workers", "1",
        "--generation-database", "none", "--no-color", "--request-timeout", "20",
    ]  # fmt: skip
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=150, check=False)


def _code_places() -> tuple[str, ...]:
    """Where the server's Python code and its packages live (imports open them)."""
    paths = sysconfig.get_paths()
    places = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        paths["stdlib"],
        paths["purelib"],
        paths["platlib"],
    }
    places |= {p for p in sys.path if p and os.path.isabs(p)}
    places.add(str(Path(__file__).resolve().parents[2] / "src"))
    return tuple(sorted(p.rstrip("/") + "/" for p in places))


def _outside(
    lines: list[str], data: Path, config: Path, emulator_port: int, own: tuple[str, ...] = ()
) -> list[str]:
    """The audit events that reached past the data folder, the quota ledger, the code, the
    emulator and the folders the server made for itself before listening (`own`)."""
    ledger = str(data.parent.resolve() / "cache" / "batchgate") + "/"
    allowed_files = (str(data.resolve()) + "/", ledger, *_code_places(), *SYSTEM_READS, *own)
    found = []
    for line in lines:
        event, _, what = line.partition("\t")
        if event in ("open", "sqlite3.connect"):
            path = what if what in (":memory:", "") else os.path.realpath(what)
            if what in (":memory:", "") or path == str(config) or path.startswith(allowed_files):
                continue
        elif event == "socket.connect" and what == repr(("127.0.0.1", emulator_port)):  # noqa: SIM114
            continue
        elif event == "socket.getaddrinfo" and what.startswith(("('127.0.0.1'", "('localhost'")):
            continue
        found.append(line)
    return found


def test_a_fuzzing_tenant_gets_no_5xx_and_reaches_nothing_outside(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    config = gateway_config(tmp_path / "gateway.yaml", emu).resolve()
    events = tmp_path / "audit.tsv"
    server = _start(tmp_path, config, events)
    listened = events.stat().st_size  # the hook writes each line at once
    try:
        key = server.keys_create()
        done = _schemathesis(server, key, tmp_path)
        operations = sum(len(ops) for ops in httpx.get(server.url + "/openapi.json").json()["paths"].values())
    finally:
        server.stop()
    summary = done.stdout[-8000:]
    assert done.returncode == 0, summary + done.stderr[-2000:]
    assert f"Tested: {operations}" in summary, summary
    links = re.search(r"API Links:\s+(\d+) covered / \d+ selected / (\d+) total \((\d+) inferred\)", summary)
    assert links is not None, summary
    covered, total, inferred = (int(g) for g in links.groups())
    assert total > inferred, "the document declares no links between create and get / cancel / results"
    assert covered > 0, summary  # the stateful phase followed some
    assert "internal error" not in server.log.read_text()
    port = int(emu.base_url("alpha").split(":")[2].split("/")[0])
    lines, own = _since_listening(events, listened)
    outside = _outside(lines, tmp_path / "data", config, port, own)
    assert outside == [], "\n".join(outside[:40])
