"""The emulated OpenAI Files API as the Batch API uses it (`POST /v1/files` multipart with
purpose=batch, `GET /v1/files/{id}`, `GET /v1/files/{id}/content`, `DELETE /v1/files/{id}`), the
output files a batch writes, and the structural validation of a batch input file.

An upload over the provider's batch limits (requests or bytes) is refused with a 400. Validation
(`parse_input`) names every bad line the way `errors.data` does: invalid JSON, a missing or
duplicate custom_id, a method other than POST, a url other than the batch's endpoint (one endpoint
per batch, shared/PROTOCOLS.md "Other endpoints"), a body that is not an object, a model that
differs from the batch's; an `/v1/embeddings` batch holding more than 50,000 embedding inputs across
its requests fails whole. A line that passes becomes a `BatchItem`, validated by the live rules of
the batch's endpoint (chat, embeddings, responses or completions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson
from aiohttp import BodyPartReader, web

from batchgate.emulator.batch.core import BatchItem, BatchProvider, StoredFile
from batchgate.emulator.batch.http import Route, json_response
from batchgate.emulator.openai_endpoints import PATHS
from batchgate.emulator.wire import ApiError

ENDPOINTS = {path: endpoint for endpoint, path in PATHS.items()}  # a batch's `endpoint` → its name
# Azure's batch guide names the endpoint without `/v1` (`/chat/completions`; `emulator.azure_api`);
# the `/v1/...` form the `openai` SDK's types offer is taken too
AZURE_ENDPOINTS = {path.removeprefix("/v1"): endpoint for endpoint, path in PATHS.items()} | ENDPOINTS
MAX_BATCH_EMBEDDING_INPUTS = 50_000


def _invalid(message: str, param: str | None = None, code: str | None = None, status: int = 400) -> ApiError:
    return ApiError(status, "invalid_request_error", message, param=param, code=code)


class OpenAIFiles:
    """The files endpoints of one OpenAI-family provider."""

    def __init__(self, bp: BatchProvider, next_id: Callable[[], int]) -> None:
        self.bp = bp
        self._next_id = next_id

    def routes(self) -> Iterable[Route]:
        return (
            ("POST", "/v1/files", self.upload),
            ("GET", "/v1/files/{file_id}", self.get_file),
            ("DELETE", "/v1/files/{file_id}", self.delete_file),
            ("GET", "/v1/files/{file_id}/content", self.file_content),
        )

    def _wall(self) -> int:
        return int(self.bp.clock.wall())

    async def upload(self, request: web.Request) -> web.StreamResponse:
        if not request.content_type.startswith("multipart/"):
            raise _invalid("Uploads must be multipart/form-data with the fields 'file' and 'purpose'.")
        limit = self.bp.max_bytes
        purpose: str | None = None
        data: bytes | None = None
        filename = "upload.jsonl"
        size = 0
        try:
            async for part in await request.multipart():
                if not isinstance(part, BodyPartReader):
                    continue
                if part.name == "purpose":
                    purpose = (await part.text()).strip()
                elif part.name == "file":
                    filename = part.filename or filename
                    buf = bytearray()
                    while chunk := await part.read_chunk():
                        size += len(chunk)
                        if size <= limit:
                            buf += chunk
                    data = bytes(buf)
        except ValueError:
            raise _invalid("The multipart/form-data body could not be parsed.") from None
        if data is None:
            raise _invalid("Missing required parameter: 'file'.", "file", "missing_required_parameter")
        if purpose != "batch":
            raise _invalid(
                f"Invalid value for 'purpose': {purpose!r}. The emulator accepts only 'batch'.", "purpose"
            )
        if size > limit:
            raise _invalid(
                f"File is too large: {size} bytes; a batch input file may hold at most {limit} bytes.",
                "file",
                "file_too_large",
            )
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        if lines > self.bp.max_requests:
            raise _invalid(
                f"The file contains {lines} requests; a batch input file may hold at most "
                f"{self.bp.max_requests} requests.",
                "file",
                "too_many_requests",
            )
        stored = StoredFile(f"file-{self._next_id():024x}", filename, "batch", data, self._wall())
        self.bp.files[stored.id] = stored
        return json_response(stored.to_dict())

    def _file(self, request: web.Request) -> StoredFile:
        file_id = request.match_info["file_id"]
        stored = self.bp.files.get(file_id)
        if stored is None:
            raise _invalid(f"No such File object: {file_id}", "id", status=404)
        return stored

    async def get_file(self, request: web.Request) -> web.StreamResponse:
        return json_response(self._file(request).to_dict())

    async def delete_file(self, request: web.Request) -> web.StreamResponse:
        stored = self._file(request)
        del self.bp.files[stored.id]
        return json_response({"id": stored.id, "object": "file", "deleted": True})

    async def file_content(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=self._file(request).data, content_type="application/octet-stream")

    def store(self, batch_id: str, kind: str, lines: list[bytes]) -> str | None:
        """Keep a batch's output or error lines as a `batch_output` file; its id (None: no lines)."""
        if not lines:
            return None
        data = b"\n".join(lines) + b"\n"
        stored = StoredFile(
            f"file-{self._next_id():024x}", f"{batch_id}_{kind}.jsonl", "batch_output", data, self._wall()
        )
        self.bp.files[stored.id] = stored
        return stored.id


def parse_input(
    data: bytes, bp: BatchProvider, url: str, endpoints: Mapping[str, str] = ENDPOINTS
) -> tuple[list[BatchItem], list[dict[str, Any]], str | None]:
    """The items of a batch input file for the batch endpoint `url`, the validation errors
    (`errors.data`) and the batch's model."""
    items: list[BatchItem] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    model: str | None = None
    lines = data.split(b"\n")
    if lines and not lines[-1].strip():
        lines.pop()
    for number, line in enumerate(lines, 1):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            errors.append(
                line_error("invalid_json_line", "This line is not parseable as valid JSON.", None, number)
            )
            continue
        problem = _line_problem(obj, seen, url)
        if problem is not None:
            errors.append(line_error(*problem, number))
            continue
        custom_id, body = obj["custom_id"], obj["body"]
        seen.add(custom_id)
        line_model = body.get("model")
        if isinstance(line_model, str):
            if model is None:
                model = line_model
            elif line_model != model:
                errors.append(
                    line_error(
                        "mismatched_model",
                        "The provided model does not match the model of other requests in the batch; "
                        "all requests in a batch must use the same model.",
                        "body.model",
                        number,
                    )
                )
                continue
        items.append(bp.parse_item(custom_id, body, endpoints[url]))
    inputs = sum(
        len(i.request.inputs) for i in items if i.request is not None and i.request.endpoint == "embeddings"
    )
    if inputs > MAX_BATCH_EMBEDDING_INPUTS:
        errors.append(
            line_error(
                "too_many_embedding_inputs",
                f"The batch holds {inputs} embedding inputs; an /v1/embeddings batch may hold at most "
                f"{MAX_BATCH_EMBEDDING_INPUTS} across all its requests.",
                None,
                None,
            )
        )
    if len(lines) > bp.max_requests:
        errors.append(line_error("too_many_requests", "The file holds too many requests.", None, None))
    if not lines:
        errors.append(line_error("empty_file", "The batch input file is empty.", None, None))
    return items, errors, model


def line_error(code: str, message: str, param: str | None, line: int | None) -> dict[str, Any]:
    return {"code": code, "message": message, "param": param, "line": line}


def _line_problem(obj: Any, seen: set[str], url: str) -> tuple[str, str, str | None] | None:
    """What is structurally wrong with one input line (code, message, param), or None."""
    if not isinstance(obj, dict):
        return "invalid_json_line", "This line is not a JSON object.", None
    custom_id = obj.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return "missing_required_parameter", "Missing required parameter: 'custom_id'.", "custom_id"
    if custom_id in seen:
        return (
            "duplicate_custom_id",
            f"The custom_id '{custom_id}' is a duplicate of another request's; the custom_id of each "
            "request in a batch must be unique.",
            "custom_id",
        )
    if obj.get("method") != "POST":
        return "invalid_method", "The method of a batch request must be POST.", "method"
    if obj.get("url") != url:
        return "invalid_url", "The URL provided for this request does not match the batch endpoint.", "url"
    if not isinstance(obj.get("body"), dict):
        return "invalid_request", "The body of a batch request must be a JSON object.", "body"
    return None
