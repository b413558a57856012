"""No field is dropped on the way to any target kind (issue 41): one file holding every OpenAI chat
field and every Anthropic Messages field (a line each), run by `batchgate run --skip-invalid`
against one target of each kind (openai, azure, anthropic, gemini, bedrock).

Each line is either refused at validation (the errors file names the line, the field and the
target; nothing of it is sent) or carried. Carried is shown twice: against an emulator refusing
every field its wire does not know (`refuse_unknown_fields`) the line completes — whatever arrived
is a field of that wire — and against one refusing the field's wire name (`reject_fields`) the
same line fails with that field named — so it arrived. A dropped field completes there instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from awsutil import aws_env
from batchgate.emulator import EmulatorThread, emulator_config_from_dict

from .harness import MODEL, Cli, read_jsonl

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]  # CLI runs as subprocesses

_TOOL = {"type": "function", "function": {"name": "get", "parameters": {"type": "object", "properties": {}}}}
_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}
OPENAI_FIELDS: Mapping[str, Any] = {
    "audio": {"voice": "alloy", "format": "wav"},
    "frequency_penalty": 0.5,
    "function_call": "auto",
    "functions": [{"name": "f", "parameters": {"type": "object"}}],
    "logit_bias": {"50256": -100},
    "logprobs": True,
    "max_completion_tokens": 50,
    "metadata": {"k": "v"},
    "modalities": ["text", "audio"],
    "n": 2,
    "parallel_tool_calls": False,
    "prediction": {"type": "content", "content": "x"},
    "presence_penalty": 0.5,
    "prompt_cache_key": "k",
    "prompt_cache_retention": "24h",
    "reasoning_effort": "low",
    "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": _SCHEMA}},
    "safety_identifier": "u1",
    "seed": 7,
    "service_tier": "flex",
    "stop": ["END"],
    "store": True,
    "stream": True,
    "stream_options": {"include_usage": True},
    "temperature": 0.5,
    "tool_choice": "required",
    "tools": [_TOOL],
    "top_logprobs": 2,
    "top_p": 0.9,
    "user": "u1",
    "verbosity": "low",
    "web_search_options": {},
}
ANTHROPIC_FIELDS: Mapping[str, Any] = {
    "system": "Be brief.",
    "cache_control": {"type": "ephemeral"},  # on a system block (nested: Anthropic's wire only)
    "metadata": {"user_id": "u1"},
    "stop_sequences": ["END"],
    "temperature": 0.5,
    "top_p": 0.9,
    "top_k": 5,
    "tools": [{"name": "get", "input_schema": {"type": "object", "properties": {}}}],
    "tool_choice": {"type": "any"},
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "service_tier": "auto",
    "container": "container_1",
    "mcp_servers": [{"type": "url", "url": "https://mcp.example", "name": "x"}],
    "context_management": {"edits": []},
}
# Where a carried field arrives on each kind's wire (None: nowhere a top-level check can see;
# response_format arrives as a forced tool: its tool_choice, which reject_fields checks first).
ON_ANTHROPIC = {
    "max_completion_tokens": None, "stop": "stop_sequences", "user": "metadata", "tools": "tools",
    "tool_choice": "tool_choice", "parallel_tool_calls": "tool_choice", "response_format": "tool_choice",
    "reasoning_effort": "thinking", "temperature": "temperature", "top_p": "top_p",
}  # fmt: skip
ON_OPENAI = {
    "system": None, "metadata": "user", "stop_sequences": "stop", "temperature": "temperature",
    "top_p": "top_p", "tools": "tools", "tool_choice": "tool_choice", "thinking": "reasoning_effort",
}  # fmt: skip
# Gemini's and Bedrock's wires nest most fields (generationConfig, inferenceConfig, present on
# every request): the top-level names that appear only when the field was given.
ON_GEMINI = {("oa", "tools"): "tools", ("oa", "tool_choice"): "toolConfig", ("an", "tools"): "tools",
             ("an", "tool_choice"): "toolConfig", ("an", "system"): "systemInstruction"}  # fmt: skip
ON_BEDROCK = {("oa", "tools"): "toolConfig", ("oa", "user"): "requestMetadata",
              ("oa", "metadata"): "requestMetadata", ("an", "tools"): "toolConfig",
              ("an", "metadata"): "requestMetadata", ("an", "system"): "system",
              ("an", "top_k"): "additionalModelRequestFields"}  # fmt: skip
AZURE_KEY_ENV = "AZURE_OPENAI_API_KEY"
AWS_ID, AWS_SECRET = "AKIDFIELDS", "fields-secret-key-0123"
AWS_ENV = {**aws_env(AWS_ID, AWS_SECRET), "AWS_DEFAULT_REGION": "us-east-1"}
KINDS = {
    "openai": "openai",
    "azure": "azure",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "bedrock": "bedrock",
}


def wire_name(kind: str, shape: str, field: str) -> str | None:
    if kind in ("gemini", "bedrock"):
        return (ON_GEMINI if kind == "gemini" else ON_BEDROCK).get((shape, field))
    if kind == "anthropic":
        if shape == "an":
            return None if field == "cache_control" else field  # nested: passthrough's unit test
        return ON_ANTHROPIC[field]
    if shape == "oa":
        return None if field == "max_completion_tokens" else field
    return ON_OPENAI[field]


def lines() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, value in OPENAI_FIELDS.items():
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"say {name}"}], name: value}
        if name == "reasoning_effort":
            body["max_tokens"] = 4096
        out.append({"custom_id": f"oa-{name}", "method": "POST", "url": "/v1/chat/completions", "body": body})
    for name, value in ANTHROPIC_FIELDS.items():
        params = {"model": MODEL, "max_tokens": 4096 if name == "thinking" else 64, name: value}
        if name == "cache_control":
            params["system"] = [{"type": "text", "text": "Be brief.", name: params.pop(name)}]
        params["messages"] = [{"role": "user", "content": f"say {name}"}]
        out.append({"custom_id": f"an-{name}", "params": params})
    return out


@pytest.fixture
def work(tmp_path: Path) -> Iterator[tuple[Cli, Path]]:
    cli = Cli(cwd=tmp_path, store=tmp_path / "jobs.db", env={AZURE_KEY_ENV: "azure-test-key-0d9", **AWS_ENV})
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(orjson.dumps(line) for line in lines()) + b"\n")
    yield cli, src
    cli.stop_all()


def run(cli: Cli, src: Path, kind: str, emulated: dict[str, Any], tag: str) -> dict[str, dict[str, Any]]:
    """`batchgate run --skip-invalid` of `src` on one `kind` target: custom_id → OUT or errors row."""
    family = KINDS[kind]
    provider = {"name": "p", "family": family, "limits": {"rpm": 10**6, "tpm": 10**9}, **emulated}
    if kind == "azure":
        provider["models"] = ["dep"]
    if kind == "bedrock":
        provider["api_key"] = f"{AWS_ID}:{AWS_SECRET}"
    emu = EmulatorThread(emulator_config_from_dict({"seed": 3, "providers": [provider]}))
    emu.start()
    try:
        target: dict[str, Any] = {"name": "p", "kind": kind, "base_url": emu.base_url("p")}
        if kind == "azure":
            target |= {"deployment": "dep", "api_version": "2024-10-21", "api_key_env": AZURE_KEY_ENV}
        if kind == "gemini":
            target["api_key"] = "gemini-fields-key"
        cfg = cli.cwd / f"{tag}.yaml"
        data = {"providers": [target], "routes": [{"model": MODEL, "targets": ["p"]}],
                "settings": {"retry": {"max_attempts": 1}}}  # fmt: skip
        cfg.write_text(yaml.safe_dump(data), encoding="utf-8")
        out = cli.cwd / f"{tag}.jsonl"
        cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--skip-invalid", "-q")
    finally:
        emu.stop()
    errors = out.with_name(out.name + ".errors.jsonl")
    rows = read_jsonl(out) + (read_jsonl(errors) if errors.exists() else [])
    return {row["custom_id"]: row for row in rows}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_field_is_carried_or_refused_at_validation_never_dropped(
    work: tuple[Cli, Path], kind: str
) -> None:
    cli, src = work
    strict = run(cli, src, kind, {"refuse_unknown_fields": True}, "strict")
    carried = {}
    for line in lines():
        cid = line["custom_id"]
        shape, field = cid.split("-", 1)
        row = strict[cid]
        error = row.get("error") or {}
        if error.get("code") == "invalid_input":  # refused before the job: the field named
            assert field in error["message"], (kind, cid, error)
            assert field == "stream" or "target 'p'" in error["message"], (kind, cid, error)
            continue
        assert row["error"] is None, (kind, cid, row["error"])  # every field that arrived is known
        if (wire := wire_name(kind, shape, field)) is not None:
            carried[cid] = wire
    assert carried, kind
    rejecting = run(cli, src, kind, {"reject_fields": sorted(set(carried.values()))}, "rejecting")
    for cid, wire in carried.items():
        error = rejecting[cid]["error"]
        assert error is not None, f"{kind}: {cid} was dropped on the way ({wire} never arrived)"
        assert wire in error["message"], (kind, cid, error)
