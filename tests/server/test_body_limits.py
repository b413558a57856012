"""Bounded request bodies on `batchgate serve`: each class of route has its bound (a live chat
request is not a file upload), a declared body over it is a 413 naming the bound before it is read,
and a chunked one is cut off at the bound — so a 190 MB body to `/v1/chat/completions`, or four at
once, leaves the server's peak memory (VmHWM of the subprocess) where it was. `--max-body` sets the
bounds; a bad one is one line and a non-zero exit."""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from batchgate.emulator import EmulatorThread
from batchgate.server.door.body_limits import MIB, BodyLimits, parse_limits, parse_size

from .harness import ALPHA, Server, _env, gateway_config, running

HUGE = 190 * MIB
_FILLER = b"a" * MIB
SERVER_SRC = Path(__file__).resolve().parents[2] / "src" / "batchgate" / "server"
_WHOLE_BODY = {"read", "json", "post", "text"}  # aiohttp's readers bounded only by client_max_size


def _whole_body_reads(tree: ast.AST) -> list[int]:
    """Lines that read a request's body whole through aiohttp (`request.read()` and kin)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _WHOLE_BODY
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "request"
    ]


def test_every_body_is_read_through_its_route_bound() -> None:
    """The middleware sets no per-route `client_max_size` (a request clone each time): a body is
    read by `body_limits.read`, within its route's bound, or streamed (uploads), never whole by
    aiohttp, which only the app's largest bound would cap."""
    found = [
        f"{path.relative_to(SERVER_SRC)}:{line}"
        for path in sorted(SERVER_SRC.rglob("*.py"))
        for line in _whole_body_reads(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert found == []
    assert _whole_body_reads(ast.parse("async def f(request):\n    return await request.json()\n")) == [2]


def test_each_route_class_has_its_bound() -> None:
    limits = BodyLimits()
    assert limits.route_class("POST", "/v1/chat/completions") == "live"
    assert limits.route_class("POST", "/v1/messages") == "live"
    for path in ("/v1/embeddings", "/v1/responses", "/v1/completions"):
        assert limits.route_class("POST", path) == "live"
    assert limits.route_class("POST", "/v1/files") == "upload"
    assert limits.route_class("POST", "/v1/jobs") == "batch"
    assert limits.route_class("POST", "/v1/messages/batches") == "batch"
    assert limits.route_class("POST", "/v1/batches") == "other"
    assert limits.route_class("POST", "/v1/jobs/job-1/cancel") == "other"
    assert limits.live < limits.batch < limits.upload
    assert limits.upload == 200 * MIB


def test_sizes_and_limits_parse_or_name_the_entry() -> None:
    assert [parse_size(t) for t in ("512", "4k", "8M", "8MiB", "1g", "2 mb")] == [
        512, 4096, 8 * MIB, 8 * MIB, 1024 * MIB, 2 * MIB
    ]  # fmt: skip
    assert parse_limits(["live=1M", "upload=500M"]) == BodyLimits(upload=500 * MIB, live=MIB)
    for bad in ("live", "live=0", "live=-3", "chat=1M", "live=lots"):
        with pytest.raises(ValueError, match=f"--max-body '{bad}'"):
            parse_limits([bad])


def peak_rss(server: Server) -> int:
    """The server process's peak resident memory so far (VmHWM), in bytes."""
    status = Path(f"/proc/{server.proc.pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def chat_body(total: int) -> Iterator[bytes]:
    """A JSON chat request of `total` bytes (give or take a few), produced a megabyte at a time."""
    yield b'{"model": "' + ALPHA.encode() + b'", "messages": [{"role": "user", "content": "'
    for _ in range(total // MIB):
        yield _FILLER
    yield b'"}]}'


def post_huge(server: Server, key: str, path: str, *, declared: bool) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    if declared:
        headers["Content-Length"] = str(sum(len(c) for c in chat_body(HUGE)))
    with httpx.Client(timeout=120) as http:
        return http.post(server.url + path, content=chat_body(HUGE), headers=headers)


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory, emu: EmulatorThread) -> Iterator[Server]:
    """A server of its own, so that its peak memory is this module's doing."""
    root = tmp_path_factory.mktemp("bodies")
    with running(root, gateway_config(root / "gateway.yaml", emu)) as s:
        yield s


@pytest.mark.integration
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_190_mb_chat_body_is_a_413_and_never_held(bounded: Server, declared: bool) -> None:
    key = bounded.keys_create()
    before = peak_rss(bounded)
    r = post_huge(bounded, key, "/v1/chat/completions", declared=declared)
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert "limit of 8 MiB" in error["message"]
    assert "--max-body live=SIZE" in error["message"]
    assert peak_rss(bounded) - before < 48 * MIB  # one bound at most, never the 190 MB
    small = {"model": ALPHA, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    ok = httpx.post(
        bounded.url + "/v1/chat/completions", json=small, headers={"Authorization": f"Bearer {key}"}
    )
    assert ok.status_code == 200, ok.text  # the route still serves what fits


def gzipped(chunks: Iterator[bytes]) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: the gzip container
    return b"".join(packer.compress(c) for c in chunks) + packer.flush()


@pytest.mark.integration
def test_a_small_gzip_body_inflating_to_190_mb_is_a_413_and_never_held(bounded: Server) -> None:
    body = gzipped(chat_body(HUGE))
    assert len(body) < MIB
    headers = {"Authorization": f"Bearer {bounded.keys_create()}", "Content-Type": "application/json"}
    before = peak_rss(bounded)
    r = httpx.post(
        bounded.url + "/v1/chat/completions", content=body, headers={**headers, "Content-Encoding": "gzip"}
    )
    assert r.status_code == 413, r.text
    assert "limit of 8 MiB" in r.json()["error"]["message"]
    assert peak_rss(bounded) - before < 32 * MIB  # inflated a chunk at a time, never bound-sized ones


@pytest.mark.integration
def test_four_190_mb_bodies_at_once_leave_memory_flat(bounded: Server) -> None:
    key = bounded.keys_create()
    before = peak_rss(bounded)
    answers: list[int] = []
    paths = ["/v1/chat/completions", "/v1/messages", "/v1/chat/completions", "/v1/messages"]
    threads = [
        threading.Thread(
            target=lambda p=p, d=d: answers.append(post_huge(bounded, key, p, declared=d).status_code)
        )
        for p, d in zip(paths, (False, False, True, False), strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [413] * 4
    assert peak_rss(bounded) - before < 96 * MIB  # four bounds at most, never 4 x 190 MB


def multipart(size: int) -> Iterator[bytes]:
    """A `POST /v1/files` form whose file is `size` bytes, a megabyte at a time (sent chunked)."""
    yield b'--B\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
    yield b'--B\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n\r\n'
    for _ in range(size // MIB):
        yield _FILLER
    yield b"\r\n--B--\r\n"


@pytest.mark.integration
def test_an_upload_over_its_bound_is_a_413_and_leaves_no_file(tmp_path: Path, emu: EmulatorThread) -> None:
    config = gateway_config(tmp_path / "gateway.yaml", emu)
    with running(tmp_path, config, "--max-body", "upload=2M") as s:
        headers = {
            "Authorization": f"Bearer {s.keys_create()}",
            "Content-Type": "multipart/form-data; boundary=B",
        }
        declared = {**headers, "Content-Length": str(sum(len(c) for c in multipart(3 * MIB)))}
        for sent in (headers, declared):  # chunked: cut off while streamed; declared: before reading
            r = httpx.post(s.url + "/v1/files", content=multipart(3 * MIB), headers=sent, timeout=60)
            assert r.status_code == 413, r.text
            assert "--max-body upload=SIZE" in r.json()["error"]["message"]
        assert list((tmp_path / "files").iterdir()) == []
        r = httpx.post(s.url + "/v1/files", content=multipart(MIB), headers=headers, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["bytes"] == MIB


@pytest.mark.integration
def test_max_body_sets_a_route_class_bound(tmp_path: Path, emu: EmulatorThread) -> None:
    with running(tmp_path, gateway_config(tmp_path / "gateway.yaml", emu), "--max-body", "other=1k") as s:
        key = s.keys_create()
        headers = {"Authorization": f"Bearer {key}"}
        big = {"input_file_id": "file-x" + "x" * 2048, "endpoint": "/v1/chat/completions"}
        r = httpx.post(s.url + "/v1/batches", json=big, headers=headers)
        assert r.status_code == 413, r.text
        assert "limit of 1024 bytes" in r.json()["error"]["message"]
        small = {"model": ALPHA, "max_tokens": 5, "messages": [{"role": "user", "content": "hi" * 2000}]}
        assert httpx.post(s.url + "/v1/chat/completions", json=small, headers=headers).status_code == 200
        for size, expected in ((1024, 400), (1025, 413)):  # the bound is taken; one byte more is not
            padded = b'{"input_file_id": "' + b"x" * (size - 21) + b'"}'
            assert len(padded) == size
            for content in (padded, iter([padded[:500], padded[500:]])):  # declared, then chunked
                r = httpx.post(s.url + "/v1/batches", content=content, headers=headers)
                assert r.status_code == expected, (size, r.text)


def test_a_bad_max_body_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("providers: []\nroutes: []\n")
    argv = [sys.executable, "-m", "batchgate", "serve", "--config", str(config), "--max-body", "chat=1M"]
    done = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "--max-body 'chat=1M'" in done.stderr
    assert "Traceback" not in done.stderr
