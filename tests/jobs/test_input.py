"""The JSONL reader: every accepted shape, every line problem (with its line number), file errors."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchgate.endpoints import MESSAGES_PARAMS
from batchgate.errors import InputError
from batchgate.jobs.input.read import InputProblem, file_sha256, read_tasks, validate_input
from batchgate.jobs.store.protocol import TaskSpec

MESSAGES = [{"role": "user", "content": "hi"}]


def write_lines(path: Path, lines: list[Any]) -> Path:
    raw = [line if isinstance(line, bytes) else orjson.dumps(line) for line in lines]
    path.write_bytes(b"\n".join(raw) + b"\n")
    return path


def read_all(path: Path, **kwargs: Any) -> tuple[list[TaskSpec], list[InputProblem]]:
    tasks: list[TaskSpec] = []
    problems: list[InputProblem] = []
    for item in read_tasks(path, **kwargs):
        (tasks if isinstance(item, TaskSpec) else problems).append(item)  # type: ignore[arg-type]
    return tasks, problems


def one_task(tmp_path: Path, line: Any) -> TaskSpec:
    tasks, problems = read_all(write_lines(tmp_path / "in.jsonl", [line]))
    assert problems == []
    [task] = tasks
    return task


def one_problem(tmp_path: Path, lines: list[Any], **kwargs: Any) -> InputProblem:
    _, problems = read_all(write_lines(tmp_path / "in.jsonl", lines), **kwargs)
    [problem] = problems
    return problem


def test_openai_batch_line(tmp_path: Path) -> None:
    body = {"model": "gpt-4o-mini", "messages": MESSAGES, "max_tokens": 10}
    line = {"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", "body": body}
    assert one_task(tmp_path, line) == TaskSpec(seq=0, line_no=1, custom_id="r1", body=body)


def test_anthropic_line_is_normalised(tmp_path: Path) -> None:
    params = {
        "model": "claude-x",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "ok"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}},
                ],
            },
        ],
        "temperature": 0.2,
        "top_p": 0.9,
        "stop_sequences": ["END"],
        "top_k": 5,
    }
    task = one_task(tmp_path, {"custom_id": "a1", "params": params})
    assert task.custom_id == "a1"
    assert task.body.pop(MESSAGES_PARAMS) == params  # kept whole for an Anthropic target
    assert task.body == {
        "model": "claude-x",
        "messages": [
            {"role": "system", "content": "Be brief.\nBe kind."},
            {"role": "user", "content": "a\nb"},
            {"role": "assistant", "content": "ok"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
                ],
            },
        ],
        "max_tokens": 100,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["END"],
    }


def test_plain_lines(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "in.jsonl",
        [
            {"model": "m", "prompt": "hello", "temperature": 0},
            {"custom_id": "x", "model": "m", "messages": MESSAGES},
            {"custom_id": "y", "model": "m", "messages": MESSAGES, "error": {"code": "c"}, "batchgate": {}},
        ],
    )
    tasks, problems = read_all(path)
    assert problems == []
    assert tasks == [
        TaskSpec(
            0,
            1,
            "line-1",
            {"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "hello"}]},
        ),
        TaskSpec(1, 2, "x", {"model": "m", "messages": MESSAGES}),
        TaskSpec(2, 3, "y", {"model": "m", "messages": MESSAGES}),
    ]


def test_blank_lines_bom_and_crlf_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    line = orjson.dumps({"model": "m", "prompt": "p"})
    path.write_bytes(b"\xef\xbb\xbf" + line + b"\r\n\r\n   \n" + line.replace(b"p}", b"q}"))
    tasks, problems = read_all(path)
    assert problems == []
    assert [(t.seq, t.line_no, t.custom_id) for t in tasks] == [(0, 1, "line-1"), (1, 4, "line-4")]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"{not json", "invalid JSON"),
        (b"[1, 2]", "expected a JSON object, got an array"),
        (b'"text"', "expected a JSON object, got a string"),
        (b"\xff\xfe{}", "not valid UTF-8 (byte 1"),
        ({"messages": MESSAGES}, "missing model"),
        ({"model": 5, "messages": MESSAGES}, "model must be a non-empty string"),
        ({"model": "m"}, "messages must be a non-empty list"),
        ({"model": "m", "messages": []}, "messages must be a non-empty list"),
        ({"model": "m", "messages": ["hi"]}, "messages[0] must be an object"),
        ({"model": "m", "prompt": ""}, "prompt must be a non-empty string"),
        ({"model": "m", "prompt": "a", "messages": MESSAGES}, "either messages or prompt"),
        ({"model": "m", "prompt": "a", "stream": True}, "stream is not supported"),
        ({"custom_id": 7, "model": "m", "prompt": "a"}, "custom_id must be a non-empty string"),
        ({"method": "POST", "url": "/v1/chat/completions", "body": {}}, "missing custom_id"),
        (
            {"custom_id": "a", "method": "GET", "url": "/v1/chat/completions", "body": {}},
            "method must be POST",
        ),
        ({"custom_id": "a", "method": "POST", "url": "/v1/moderations", "body": {}}, "url must be"),
        ({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": []}, "body must be"),
        ({"custom_id": "a", "params": "x"}, "params must be a JSON object"),
        ({"custom_id": "a", "params": {"model": "c", "messages": []}}, "params.messages must be"),
        ({"params": {"model": "c", "messages": MESSAGES}}, "missing custom_id"),
        (
            {
                "custom_id": "a",
                "params": {"model": "c", "messages": [{"role": "user", "content": [{"type": "tool"}]}]},
            },
            "unsupported content block type 'tool'",
        ),
    ],
)
def test_line_problems_name_their_line(tmp_path: Path, line: Any, reason: str) -> None:
    good = {"model": "m", "prompt": "ok"}
    problem = one_problem(tmp_path, [good, good, line, good])
    assert problem.line_no == 3
    assert reason in problem.reason
    assert problem.describe(tmp_path / "in.jsonl") == f"{tmp_path / 'in.jsonl'}:3: {problem.reason}"
    assert str(problem.to_error("in.jsonl")) == f"in.jsonl:3: {problem.reason}"


def test_unknown_model(tmp_path: Path) -> None:
    lines = [{"model": "gpt", "prompt": "a"}, {"model": "nope", "prompt": "b"}]
    problem = one_problem(tmp_path, lines, known_models={"gpt", "claude"})
    assert (problem.line_no, problem.reason) == (2, "unknown model 'nope' (configured routes: claude, gpt)")
    _, problems = read_all(tmp_path / "in.jsonl")  # no route list given: no check
    assert problems == []


def test_duplicates_name_both_lines_and_keep_seq_dense(tmp_path: Path) -> None:
    lines = [
        {"custom_id": "a", "model": "m", "prompt": "1"},
        {"custom_id": "b", "model": "m", "prompt": "2"},
        {"custom_id": "a", "model": "m", "prompt": "3"},
        b"oops",
        {"custom_id": "c", "model": "m", "prompt": "4"},
    ]
    tasks, problems = read_all(write_lines(tmp_path / "in.jsonl", lines))
    assert [(t.seq, t.line_no, t.custom_id) for t in tasks] == [(0, 1, "a"), (1, 2, "b"), (2, 5, "c")]
    assert (problems[0].line_no, problems[0].reason) == (3, "duplicate custom_id 'a' (first on line 1)")
    assert problems[1].line_no == 4


def test_duplicates_are_confirmed_by_re_reading_the_first_line(tmp_path: Path) -> None:
    # The first line carries a BOM; an explicit custom_id repeats the id generated for line 2.
    path = tmp_path / "in.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf"
        + b"\n".join(
            orjson.dumps(obj)
            for obj in (
                {"custom_id": "first", "model": "m", "prompt": "1"},
                {"model": "m", "prompt": "2"},
                {"custom_id": "line-2", "model": "m", "prompt": "3"},
                {"custom_id": "first", "model": "m", "prompt": "4"},
            )
        )
    )
    tasks, problems = read_all(path)
    assert [t.custom_id for t in tasks] == ["first", "line-2"]
    assert [(p.line_no, p.reason) for p in problems] == [
        (3, "duplicate custom_id 'line-2' (first on line 2)"),
        (4, "duplicate custom_id 'first' (first on line 1)"),
    ]


def test_a_duplicate_far_from_its_first_line_is_found_across_blank_and_long_lines(tmp_path: Path) -> None:
    # The first line is re-read by its number from the offset of a line kept every few hundred:
    # blank and over-long lines before it count as lines.
    lines = [orjson.dumps({"custom_id": f"id-{i}", "model": "m", "prompt": "p"}) for i in range(900)]
    lines[10], lines[600] = b"", orjson.dumps({"model": "m", "prompt": "y" * 5000})
    lines.append(orjson.dumps({"custom_id": "id-700", "model": "m", "prompt": "again"}))
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    _, problems = read_all(path, max_line_bytes=1000)
    assert [(p.line_no, p.reason) for p in problems][-1] == (
        901,
        "duplicate custom_id 'id-700' (first on line 701)",
    )


def test_over_long_line_is_skipped_and_counting_goes_on(tmp_path: Path) -> None:
    short = orjson.dumps({"model": "m", "prompt": "x"})
    long = orjson.dumps({"model": "m", "prompt": "y" * 5000})
    path = tmp_path / "in.jsonl"
    path.write_bytes(short + b"\n" + long + b"\n" + short.replace(b"x", b"z") + b"\n" + long)
    tasks, problems = read_all(path, max_line_bytes=1000)
    assert [t.line_no for t in tasks] == [1, 3]
    assert [(p.line_no, p.reason) for p in problems] == [
        (2, "line is longer than 1000 bytes"),
        (4, "line is longer than 1000 bytes"),
    ]
    report = validate_input(path, None, 1000)
    assert report.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (report.task_count, report.line_count, report.problem_count, report.ok) == (2, 4, 2, False)


def test_a_line_exactly_at_the_limit_is_accepted(tmp_path: Path) -> None:
    line = orjson.dumps({"model": "m", "prompt": "x" * 50})
    path = tmp_path / "in.jsonl"
    path.write_bytes(line + b"\n" + line.replace(b"x", b"y"))
    tasks, problems = read_all(path, max_line_bytes=len(line))
    assert (len(tasks), problems) == (2, [])


def test_validate_keeps_the_first_thousand_problems(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"x\n" * 1500 + orjson.dumps({"model": "m", "prompt": "ok"}) + b"\n")
    report = validate_input(path, {"m"})
    assert (report.task_count, report.problem_count, len(report.problems)) == (1, 1500, 1000)
    assert report.problems[-1].line_no == 1000
    assert report.sha256 == file_sha256(path)


def test_file_problems_raise_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing\.jsonl: no such file"):
        list(read_tasks(tmp_path / "missing.jsonl"))
    with pytest.raises(InputError, match="is a directory"):
        list(read_tasks(tmp_path))
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"empty\.jsonl: the input is empty"):
        list(read_tasks(empty))
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b"\n  \n\n")
    with pytest.raises(InputError, match="empty"):
        validate_input(blank)
    with pytest.raises(InputError, match="no such file"):
        file_sha256(tmp_path / "missing.jsonl")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "in.jsonl", [{"model": "m", "prompt": "p"}])
    path.chmod(0)
    with pytest.raises(InputError, match="cannot open"):
        list(read_tasks(path))


_lines = st.lists(st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=8)
_json_lines = st.lists(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["model", "messages",
            "prompt", "custom_id", "params", "body", "url", "method", "role", "content"]), inner, max_size=4),
        max_leaves=8,
    ).map(orjson.dumps),
    min_size=1,
    max_size=6,
)  # fmt: skip


def _fuzz(tmp_path: Path, lines: list[bytes], max_line_bytes: int) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(b"\n".join(lines))
    bom_free = [lines[0].removeprefix(b"\xef\xbb\xbf"), *lines[1:]]
    if not any(
        clean.strip() or len(line) > max_line_bytes for line, clean in zip(lines, bom_free, strict=True)
    ):
        with pytest.raises(InputError, match="empty"):
            list(read_tasks(path, known_models={"m"}, max_line_bytes=max_line_bytes))
        return
    items = list(read_tasks(path, known_models={"m"}, max_line_bytes=max_line_bytes))
    assert items
    line_count = len(lines)
    for item in items:
        assert 1 <= item.line_no <= line_count
        if isinstance(item, InputProblem):
            assert item.reason
            assert "\n" not in item.reason


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=_lines)
def test_fuzz_bytes_never_raise_anything_but_input_error(tmp_path: Path, lines: list[bytes]) -> None:
    _fuzz(tmp_path, lines, 40)


@pytest.mark.slow  # 300 fuzzed files
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=_json_lines)
def test_fuzz_json_never_raise_anything_but_input_error(tmp_path: Path, lines: list[bytes]) -> None:
    _fuzz(tmp_path, lines, 300)
