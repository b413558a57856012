"""kill -9 `batchgate serve` again and again while three jobs run, and check what the issue claims:
no item lost, no succeeded item sent again, every callback delivered at least once.

    python bench/serve_kills.py [--kills 10] [--items 2000] [--seed 14] [--rpm 4800]
                                [--latency-ms 100] [--gap 2,10] [--receiver-fails 1]

The emulator runs as its own process (`batchgate emulate`, `record_prompts: true`), so what it
received survives the kills; the server is a subprocess with its own store and data folder in a
temp dir; a callback receiver (a thread here, allow-listed with `--callback-allow 127.0.0.1`)
records every delivery and answers the first `--receiver-fails` attempts of each event with a 500,
so each event waits in the server's outbox for its retry (default delays) across the kills.
Three jobs of `--items` lines each on one provider declared at `--rpm`:
an OpenAI batch made with the `openai` SDK (`metadata.callback_url`, normal priority) and two
native `/v1/jobs` jobs with `callback_url` (high, low). The server gets SIGKILL after a seeded
random `--gap` (seconds of its uptime) and is started again, `--kills` times.

"Succeeded items sent again" is exact: right after each kill (the process is gone) the bench reads
the items the store holds as succeeded and how many requests the emulator had received; any later
request for one of those items is a re-send of a succeeded item. (Requests answered by the
provider but not yet recorded when the kill came are rightly sent again; the emulator's
`duplicates` counts them and is printed for context.) Exits non-zero if a claim fails.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml
from openai import OpenAI

from batchgate.emulator import EmulatorProcess
from batchgate.server.callbacks.delivery import create_secret
from batchgate.server.tenancy.keys import create_key
from batchgate.server.tenancy.registry import REGISTRY_FILE, Registry

MODEL = "m-bench"
SRC = Path(__file__).resolve().parent.parent / "src"
JOBS = ("batch", "high", "low")  # the batch runs at normal priority
ENDED = ("completed", "failed", "cancelled", "expired")
WAIT_LIMIT_S = 900.0


@dataclass
class Receiver:
    """Records each callback: (webhook-id, the object it names, signature valid, answer). The
    first `fails` attempts of each event are answered 500, so every event is delivered again."""

    fails: int = 1
    secret: str = ""
    seen: list[tuple[str, str, bool, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, headers: dict[str, str], body: bytes) -> int:
        wid, ts = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
        key = base64.b64decode(self.secret.removeprefix("whsec_"))
        mac = hmac.new(key, f"{wid}.{ts}.".encode() + body, hashlib.sha256).digest()
        valid = headers.get("webhook-signature", "") == "v1," + base64.b64encode(mac).decode()
        with self.lock:
            status = 500 if sum(1 for x in self.seen if x[0] == wid) < self.fails else 200
            self.seen.append((wid, str(orjson.loads(body)["data"]["id"]), valid, status))
        return status

    def of(self, object_id: str) -> list[tuple[str, bool, int]]:
        with self.lock:
            return [(wid, ok, status) for wid, oid, ok, status in self.seen if oid == object_id]

    def delivered(self, object_id: str) -> bool:
        return any(status == 200 for _, _, status in self.of(object_id))


def _receive(receiver: Receiver) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = receiver.record({k.lower(): v for k, v in self.headers.items()}, body)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def _files(root: Path, args: argparse.Namespace) -> tuple[Path, Path]:
    """The emulator's config and the gateway's (which reaches it once it listens)."""
    latency = {"ttft_p50_ms": args.latency_ms, "ttft_sigma": 0.2, "per_token_ms": 0}
    emu = {
        "seed": args.seed,
        "record_prompts": True,
        "providers": [
            {
                "name": "alpha",
                "family": "openai",
                "limits": {"rpm": args.rpm, "tpm": 10**9},
                "latency": latency,
            }
        ],
    }
    (root / "emu.yaml").write_text(yaml.safe_dump(emu), encoding="utf-8")
    return root / "emu.yaml", root / "gw.yaml"


def _gateway(path: Path, base_url: str, rpm: int) -> None:
    data = {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": base_url, "limits": {"rpm": rpm}}],
        "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini"]}],
        "settings": {"concurrency": 64, "seed": 1},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")


def _lines(job: str, n: int) -> list[dict[str, Any]]:
    """The prompt is `<job> <i>` and the custom_id `<job>-<i>`: the emulator's log names the item."""
    out = []
    for i in range(n):
        body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": f"{job} {i}"}]}
        out.append({"custom_id": f"{job}-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body})
    return out


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Kills:
    """Per kill: how many requests the emulator had received and the items the store held as
    succeeded; and how many kills came after some job had ended (its callback in the outbox)."""

    marks: list[tuple[int, set[str]]] = field(default_factory=list)
    after_an_end: int = 0


class Service:
    """`batchgate serve` as a subprocess, started again after each kill on the same store."""

    def __init__(self, root: Path, config: Path) -> None:
        self.root = root
        self.argv = [sys.executable, "-m", "batchgate", "serve", "--config", str(config), "--port", "0"]
        self.argv += ["--store", str(root / "jobs.db"), "--callback-allow", "127.0.0.1"]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> str:
        with (self.root / "server.log").open("a") as err:
            self.proc = subprocess.Popen(self.argv, env=_env(), stdout=subprocess.PIPE, stderr=err, text=True)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if "listening on " not in first:
            self.proc.kill()
            raise SystemExit(f"the server did not start:\n{(self.root / 'server.log').read_text()}")
        self.url = first.split("listening on ", 1)[1].strip()
        return self.url

    def stop(self, sig: signal.Signals) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=120)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None


def _submit(url: str, key: str, hook: str, n: int) -> dict[str, str]:
    """The three jobs; returns their ids by name."""
    ai = OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    data = b"".join(orjson.dumps(x) + b"\n" for x in _lines("batch", n))
    f = ai.files.create(file=("batch.jsonl", data), purpose="batch")
    meta = {"callback_url": hook}
    made = ai.batches.create(
        input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h", metadata=meta
    )
    ids = {"batch": made.id}
    with httpx.Client(base_url=url + "/v1", headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        for name in ("high", "low"):
            body = {"requests": _lines(name, n), "priority": name, "callback_url": hook, "name": name}
            r = http.post("/jobs", json=body)
            assert r.status_code == 201, r.text
            ids[name] = r.json()["id"]
    return ids


def _states(url: str, key: str, ids: dict[str, str]) -> dict[str, str]:
    with httpx.Client(base_url=url + "/v1", headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        out = {"batch": http.get(f"/batches/{ids['batch']}").json()["status"]}
        for name in ("high", "low"):
            out[name] = http.get(f"/jobs/{ids[name]}").json()["state"]
    return out


def _succeeded(store: Path) -> set[str]:
    """The items the store holds as succeeded (read while no server runs)."""
    conn = sqlite3.connect(store)
    try:
        return {row[0] for row in conn.execute("SELECT custom_id FROM tasks WHERE state = 'succeeded'")}
    finally:
        conn.close()


def _kills(
    svc: Service, emu: EmulatorProcess, key: str, ids: dict[str, str], args: argparse.Namespace
) -> Kills:
    """SIGKILL the server after a random gap of uptime and start it again, while a job runs."""
    rng = random.Random(args.seed)
    lo, hi = args.gap
    kills = Kills()
    while len(kills.marks) < args.kills:
        time.sleep(rng.uniform(lo, hi))
        states = _states(svc.url, key, ids).values()
        if all(s in ENDED for s in states):
            break  # every job ended before this kill: no jobs left running to kill under
        kills.after_an_end += any(s in ENDED for s in states)
        svc.stop(signal.SIGKILL)
        kills.marks.append((len(emu.received()["alpha"]), _succeeded(svc.root / "jobs.db")))
        svc.start()
    return kills


def _wait(svc: Service, key: str, ids: dict[str, str], receiver: Receiver) -> dict[str, str]:
    """Every job ended and announced (bounded)."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    while True:
        states = _states(svc.url, key, ids)
        if all(s in ENDED for s in states.values()) and all(receiver.delivered(i) for i in ids.values()):
            return states
        if time.monotonic() > deadline:
            return states
        time.sleep(0.5)


def _outputs(url: str, key: str, ids: dict[str, str]) -> tuple[dict[str, list[tuple[str, bool]]], int]:
    """Per job, its output lines as (custom_id, succeeded); and how many output files the key's
    file list holds for the batch (one, however often a kill interrupted writing it)."""
    ai = OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    listed = sum(1 for f in ai.files.list() if f.filename == f"{ids['batch']}_output.jsonl")
    batch = ai.batches.retrieve(ids["batch"])
    rows: list[tuple[str, bool]] = []
    for fid, ok in ((batch.output_file_id, True), (batch.error_file_id, False)):
        if fid:
            for raw in ai.files.content(fid).read().splitlines():
                line = orjson.loads(raw)
                rows.append((line["custom_id"], ok and line["response"]["status_code"] == 200))
    out = {"batch": rows}
    with httpx.Client(base_url=url + "/v1", headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        for name in ("high", "low"):
            lines = [
                orjson.loads(x) for x in http.get(f"/jobs/{ids[name]}/results").content.splitlines() if x
            ]
            out[name] = [(x["custom_id"], x.get("error") is None) for x in lines]
    return out, listed


def _resent(received: list[str], marks: list[tuple[int, set[str]]]) -> int:
    """Requests received after a kill for an item the store held as succeeded at that kill."""
    ids = [prompt.replace(" ", "-") for prompt in received]
    return sum(1 for at, done in marks for cid in ids[at:] if cid in done)


def _claims(args: argparse.Namespace, found: dict[str, Any]) -> list[str]:
    """Print the figures; return the claims that failed."""
    failed = []
    print(
        f"{found['kills']} kills of {args.kills} asked (seed {args.seed}), {found['after_an_end']} of them "
        f"after a job had ended; total {found['seconds']:.1f} s"
    )
    for name in JOBS:
        rows = found["outputs"][name]
        counts = Counter(cid for cid, _ in rows)
        lost = sum(1 for i in range(args.items) if counts[f"{name}-{i}"] == 0)
        twice = sum(n - 1 for n in counts.values() if n > 1)
        bad = sum(1 for _, ok in rows if not ok)
        hooks = found["callbacks"][name]
        wids = {wid for wid, _, _ in hooks}
        signed = all(ok for _, ok, _ in hooks)
        answered = sum(1 for _, _, status in hooks if status == 200)
        print(
            f"{name:<6} {found['states'][name]:<10} {len(rows)} lines: {lost} lost, {twice} twice, "
            f"{bad} failed; "
            f"callbacks {len(hooks)}, {answered} answered 200 ({len(wids)} webhook-id, "
            f"signatures {'valid' if signed else 'INVALID'})"
        )
        if found["states"][name] != "completed" or lost or twice or bad:
            failed.append(f"{name}: every item exactly once, succeeded")
        if answered < 1 or len(wids) != 1 or not signed:
            failed.append(f"{name}: its callback at least once, one webhook-id, signed")
    print(
        f"succeeded items sent again: {found['resent']} "
        f"(requests {found['requests']} for {len(JOBS) * args.items} items; answers lost to kills "
        f"and re-sent, the emulator's duplicates: {found['duplicates']})"
    )
    print(f"items the store held as succeeded at each kill: {found['at_kills']}")
    print(f"the batch's output files listed: {found['output_files']}")
    if found["output_files"] != 1:
        failed.append("one output file for the batch")
    print(f"server log: {len(found['errors'])} error lines")
    for line in found["errors"][:5]:
        print(f"  {line}")
    if found["errors"]:
        failed.append("no error in the server's log")
    if found["resent"]:
        failed.append("no succeeded item sent again")
    if found["kills"] < args.kills:
        failed.append(f"{args.kills} kills with jobs running")
    return failed


def _key(root: Path, receiver: Receiver) -> str:
    """A client key with its webhook secret (the receiver checks the signatures with it)."""
    registry = Registry(root / REGISTRY_FILE)
    try:
        made, token = create_key(registry, admin=False, name="bench", now=int(time.time()))
        receiver.secret = create_secret(registry, made.id)
        return token
    finally:
        registry.close()


def run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    emu_config, gw = _files(root, args)
    receiver = Receiver(fails=args.receiver_fails)
    httpd = _receive(receiver)
    hook = f"http://127.0.0.1:{httpd.server_address[1]}/hooks/batchgate"
    key = _key(root, receiver)
    emu = EmulatorProcess(emu_config)
    emu.start()
    svc = Service(root, gw)
    try:
        _gateway(gw, emu.base_url("alpha"), args.rpm)
        started = time.perf_counter()
        ids = _submit(svc.start(), key, hook, args.items)
        kills = _kills(svc, emu, key, ids, args)
        states = _wait(svc, key, ids, receiver)
        seconds = time.perf_counter() - started
        outputs, listed = _outputs(svc.url, key, ids)
        received = emu.received()["alpha"]
        stats = emu.stats()["providers"]["alpha"]
        log = (root / "server.log").read_text(encoding="utf-8", errors="replace").splitlines()
    finally:
        svc.stop(signal.SIGTERM)
        emu.stop()
        httpd.shutdown()
        httpd.server_close()
    return {
        "kills": len(kills.marks),
        "after_an_end": kills.after_an_end,
        "seconds": seconds,
        "states": states,
        "outputs": outputs,
        "output_files": listed,
        "callbacks": {name: receiver.of(ids[name]) for name in JOBS},
        "resent": _resent(received, kills.marks),
        "at_kills": [len(done) for _, done in kills.marks],
        "requests": len(received),
        "duplicates": stats["duplicates"],
        "errors": [line for line in log if " ERROR " in line or "Traceback" in line],
    }


def _gap(text: str) -> tuple[float, float]:
    lo, _, hi = text.partition(",")
    return float(lo), float(hi or lo)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--items", type=int, default=2000, help="lines per job (three jobs)")
    parser.add_argument("--seed", type=int, default=14, help="seeds the kill moments and the emulator")
    parser.add_argument("--rpm", type=int, default=4800, help="the provider's limit (declared and enforced)")
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument(
        "--receiver-fails",
        type=int,
        default=1,
        help="the receiver answers 500 to this many attempts per event",
    )
    parser.add_argument("--gap", type=_gap, default=(2.0, 10.0), help="LO,HI seconds of uptime before a kill")
    args = parser.parse_args(argv)
    print(f"3 jobs x {args.items} items, rpm {args.rpm}, {args.latency_ms:g} ms; kill -9 every {args.gap} s")
    with tempfile.TemporaryDirectory() as tmp:
        failed = _claims(args, run(Path(tmp), args))
    for claim in failed:
        print(f"FAILED: {claim}")
    print("all claims hold" if not failed else f"{len(failed)} claim(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
