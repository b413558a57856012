"""A hostile tenant over real sockets (issue 27): every field is range-checked at the door and
refused whole with a 4xx naming it — far dates, metadata past OpenAI's limits, junk query values,
non-UTF-8 bytes in the key headers — and nothing of a refused request is stored; a row stored
before those checks never breaks a listing."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from .harness import ALPHA, Server, client, upload, wait_ended
from .jobs_client import JobsClient, requests_for

pytestmark = pytest.mark.integration
FAR = "9999-12-31T23:59:59-14:00"  # past year 9999 once in UTC


@pytest.fixture
def tenant(server: Server) -> Iterator[JobsClient]:
    """A key of its own, so its listing holds only what the test made."""
    c = JobsClient(server, server.keys_create())
    try:
        yield c
    finally:
        c.close()


def _raw_status(server: Server, header: bytes) -> int:
    """The status of `GET /v1/jobs` with `header` sent as raw bytes (httpx refuses non-ASCII)."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n" + header + b"\r\nConnection: close\r\n\r\n")
        head = s.recv(64)
    return int(head.split(b" ", 2)[1])


@pytest.mark.parametrize("name", ["not_before", "deadline"])
def test_a_far_date_is_refused_naming_its_field_and_nothing_is_stored(tenant: JobsClient, name: str) -> None:
    r = tenant.http.post("/jobs", json={"requests": requests_for(ALPHA, 1, "far"), name: FAR})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == name
    assert tenant.find()["data"] == []


@pytest.mark.parametrize(
    ("metadata", "why"),
    [
        ({f"k{i}": "v" for i in range(2000)}, "2000 keys"),
        ({"k" * 65: "v"}, "a 65-character key"),
        ({"k": "v" * 513}, "a 513-character value"),
        ({"k": 5}, "a value that is not a string"),
    ],
)
def test_metadata_past_openai_limits_is_refused_on_jobs_and_batches(
    server: Server, tenant: JobsClient, metadata: dict[str, object], why: str
) -> None:
    job = tenant.http.post("/jobs", json={"requests": requests_for(ALPHA, 1, "md"), "metadata": metadata})
    assert (job.status_code, job.json()["error"]["param"]) == (400, "metadata"), why
    assert tenant.find()["data"] == []
    c = client(server, tenant.http.headers["Authorization"].removeprefix("Bearer "))
    file_id = upload(c, requests_for(ALPHA, 1, "md"))
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h",
            "metadata": metadata}  # fmt: skip
    batch = tenant.http.post("/batches", json=body)
    assert (batch.status_code, batch.json()["error"]["param"]) == (400, "metadata"), why
    assert tenant.http.get("/batches").json()["data"] == []


@pytest.mark.parametrize(
    "path",
    ["/jobs?limit=%C2%B2", "/batches?limit=%C2%B2", "/messages/batches?limit=%C2%B2",
     "/batches?limit=%D9%A3", "/jobs?limit=1_0", "/messages/batches?limit=+5"],
)  # fmt: skip
def test_junk_query_values_are_a_400(tenant: JobsClient, path: str) -> None:
    r = tenant.http.get(path)
    assert r.status_code == 400, r.text
    assert "limit" in r.text


@pytest.mark.parametrize(
    "header", [b"Authorization: Bearer \xff\xfe", b"x-api-key: \xff", b"x-api-key: a\xc3\xa9"]
)
def test_a_non_utf8_byte_in_the_key_headers_is_a_401(server: Server, header: bytes) -> None:
    assert _raw_status(server, header) == 401


def test_a_row_stored_with_a_far_date_never_breaks_a_listing(
    server: Server, keys: dict[str, str], tenant: JobsClient
) -> None:
    """As a server before the range checks stored it: every listing and the job itself answer."""
    made = tenant.create(requests=requests_for(ALPHA, 1, "old"), not_before="2199-01-01T00:00:00Z")
    db = sqlite3.connect(server.root / "server.db")
    try:
        with db:
            db.execute(
                "UPDATE job_specs SET spec = json_set(spec, '$.not_before', 253402351199.0) WHERE id = ?",
                (made["id"],),
            )
    finally:
        db.close()
    assert tenant.get(made["id"])["not_before"] is not None
    assert [j["id"] for j in tenant.find()["data"]] == [made["id"]]
    admin = {"Authorization": f"Bearer {keys['admin']}"}
    assert httpx.get(f"{server.base_url}/jobs", headers=admin, timeout=30).status_code == 200
    dashboard = tenant.http.get("/dashboard/jobs")
    assert dashboard.status_code == 200, dashboard.text
    assert [j["id"] for j in orjson.loads(dashboard.content)["data"]] == [made["id"]]


# -- output checks: a tenant's schema and regex are data ----------------------------------------
def _echo_request(custom_id: str, word: str) -> dict[str, object]:
    """A request the emulator answers `echo: <word>` (room for the whole word)."""
    body = {"model": ALPHA, "max_tokens": 200, "messages": [{"role": "user", "content": word}]}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def _refused_schema(tenant: JobsClient, schema: dict[str, object]) -> dict[str, object]:
    r = tenant.http.post(
        "/jobs", json={"requests": requests_for(ALPHA, 1, "ref"), "validate": {"schema": schema}}
    )
    assert r.status_code == 400, r.text
    error: dict[str, object] = r.json()["error"]
    assert error["param"] == "validate.schema"
    assert tenant.find()["data"] == []  # refused whole: nothing stored
    return error


def test_a_ref_to_a_local_file_is_refused_and_the_file_never_read(tenant: JobsClient, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"type": "string", "const": "TOP-SECRET-4e1f"}', encoding="utf-8")
    error = _refused_schema(tenant, {"$ref": secret.as_uri()})
    assert "'#'" in str(error["message"])
    assert "TOP-SECRET" not in str(error["message"])


def test_a_ref_to_a_url_is_refused_and_nothing_is_fetched(tenant: JobsClient) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        _refused_schema(tenant, {"properties": {"a": {"$ref": f"http://127.0.0.1:{port}/schema.json"}}})
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected


def test_a_ref_to_something_that_is_not_a_schema_is_refused_without_quoting_it(
    server: Server, tenant: JobsClient
) -> None:
    schema: dict[str, object] = {"x-doc": {"secret": ["TOP-SECRET-77aa"]}, "$ref": "#/x-doc/secret"}
    error = _refused_schema(tenant, schema)
    assert "not a schema" in str(error["message"])
    assert "TOP-SECRET" not in str(error["message"])
    assert "TOP-SECRET" not in server.log.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("check", "field"),
    [
        ({"schema": {"type": 5}}, "validate.schema"),  # not a valid JSON Schema
        ({"schema": {"properties": {"a": {"minLength": -1}}}}, "validate.schema"),
        ({"regex": "("}, "validate.regex"),  # a pattern the regex engine cannot take
        ({"regex": "[z-a]"}, "validate.regex"),
    ],
)
def test_an_output_check_the_engine_cannot_take_is_a_400_naming_the_field(
    tenant: JobsClient, check: dict[str, object], field: str
) -> None:
    r = tenant.http.post("/jobs", json={"requests": requests_for(ALPHA, 1, "check"), "validate": check})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == field
    assert str(error["message"]).startswith(f"'{field}': ")
    assert "\n" not in str(error["message"])
    assert tenant.find()["data"] == []  # refused whole: nothing stored


def _rss_mb(server: Server) -> int:
    status = Path(f"/proc/{server.proc.pid}/status").read_text(encoding="utf-8")
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) // 1024


@pytest.mark.parametrize(
    ("check", "field"),
    [
        ({"regex": "a{2000000}"}, "validate.regex"),  # ten bytes, ~277 MB and a stalled loop once
        ({"regex": "a{4294967294}"}, "validate.regex"),  # a MemoryError after seconds once
        ({"regex": "(?:(?:a{100}){100}){100}"}, "validate.regex"),
        ({"schema": {"properties": {"a": {"type": "string", "pattern": "a{2000000}"}}}}, "validate.schema"),
        ({"schema": {"patternProperties": {"b{2000000}": {}}}}, "validate.schema"),
    ],
)
def test_a_pattern_that_expands_past_the_bound_is_refused_before_compiling(
    server: Server, tenant: JobsClient, check: dict[str, object], field: str
) -> None:
    """Measured from its text (issue 40): refused with a 400 naming the field, nothing compiled,
    so the server's memory stays where it was and the next request is answered."""
    before = _rss_mb(server)
    r = tenant.http.post("/jobs", json={"requests": requests_for(ALPHA, 1, "big"), "validate": check})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == field
    assert "too large to compile" in str(error["message"])
    assert tenant.find()["data"] == []
    assert tenant.http.get("/jobs").status_code == 200
    assert _rss_mb(server) - before < 100  # a compiled a{2000000} alone kept ~277 MB


@pytest.mark.slow
def test_a_backtracking_regex_fails_its_answers_while_every_route_answers(tenant: JobsClient) -> None:
    """`(a|aa)+$` on `echo: a…ab` backtracks for ever on Python's `re`: the check runs on an
    engine with a time limit, in a thread, so the server answers meanwhile and the item fails."""
    word = "a" * 64 + "b"
    made = tenant.create(requests=[_echo_request("slow-check", word)], validate={"regex": "echo: (a|aa)+$"})
    tenant.wait_state(made["id"], ("running", "completed", "failed"))
    for _ in range(5):  # while the check runs (a stalled loop would time these out)
        assert tenant.http.get("/jobs").status_code == 200
    job = tenant.wait_state(made["id"])
    assert job["request_counts"]["failed"] == 1
    [line] = tenant.results(made["id"])
    assert "output check took longer" in orjson.dumps(line["error"]).decode()


# -- an empty batch ------------------------------------------------------------------------------
@pytest.mark.parametrize("data", [b"", b"\n  \n\t\n"], ids=["empty", "blank-only"])
def test_a_batch_over_an_empty_file_fails_validation_saying_so(server: Server, data: bytes) -> None:
    c = client(server, server.keys_create())
    file_id = c.files.create(file=("input.jsonl", data), purpose="batch").id
    made = c.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    ended = wait_ended(c, made.id)
    assert ended.status == "failed"
    assert ended.errors is not None
    assert ended.errors.data is not None
    [error] = ended.errors.data
    assert (error.code, error.line) == ("empty_file", None)
    assert "empty" in (error.message or "")
    log = server.log.read_text(encoding="utf-8").splitlines()
    assert [line for line in log if made.id in line and "ERROR" in line] == []


def test_a_custom_id_with_a_trailing_newline_is_refused_by_the_anthropic_route(tenant: JobsClient) -> None:
    params = {"model": ALPHA, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    r = tenant.http.post("/messages/batches", json={"requests": [{"custom_id": "a\n", "params": params}]})
    assert r.status_code == 400, r.text
    assert "custom_id" in r.text


def test_the_file_listing_honours_limit_and_after(server: Server) -> None:
    """`GET /v1/files` once returned every file at once whatever `limit` said (issue 40)."""
    c = client(server, server.keys_create())
    made = [c.files.create(file=(f"f{i}.jsonl", b"{}\n"), purpose="batch").id for i in range(5)]
    first = c.files.list(limit=2)
    assert [f.id for f in first.data] == made[::-1][:2]
    assert first.has_more is True
    rest = c.files.list(limit=10, after=first.data[-1].id)
    assert [f.id for f in rest.data] == made[::-1][2:]
    assert rest.has_more is False
