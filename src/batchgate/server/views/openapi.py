"""The OpenAPI 3.1 document the service serves at `GET /openapi.json` (no key needed): the native
job API, OpenAI's Files and Batches endpoints (a batch on any of the four endpoints), the live
proxy (`/v1/chat/completions`, `/v1/embeddings`, `/v1/responses`, `/v1/completions`,
`/v1/messages`), Anthropic's Message Batches (their errors in Anthropic's shape, the key also as
`x-api-key`), bearer-key security, the schemas of `openapi_schemas`."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from batchgate.server.job_api.job_table import STATES
from batchgate.server.views.openapi_schemas import SCHEMAS, STR, Schema, ref

_JSON = "application/json"


def _answer(description: str, schema: Schema | None = None, media: str = _JSON) -> Schema:
    if schema is None:
        return {"description": description}
    return {"description": description, "content": {media: {"schema": schema}}}


def _errors(*codes: int, shape: str = "Error") -> dict[str, Schema]:
    found = {str(c): _answer("refused: the error says why", ref(shape)) for c in codes}
    return {
        **found,
        "401": _answer("missing or unknown key", ref(shape)),
        "default": _answer("error", ref(shape)),
    }


def _op(
    op_id: str,
    summary: str,
    ok: Schema,
    *,
    status: str = "200",
    errors: tuple[int, ...] = (400, 404),
    params: list[Schema] | None = None,
    body: Schema | None = None,
    anthropic: bool = False,
) -> Schema:
    shape = "AnthropicError" if anthropic else "Error"
    responses = {status: ok, **_errors(*errors, shape=shape)}
    op: Schema = {"operationId": op_id, "summary": summary, "responses": responses}
    if anthropic:
        op["security"] = [{"bearer": []}, {"apiKey": []}]
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": True, "content": body}
    return op


def _query(name: str, schema: Schema, description: str = "", explode: bool = False) -> Schema:
    p: Schema = {"name": name, "in": "query", "required": False, "schema": schema}
    if description:
        p["description"] = description
    if explode:
        p.update(style="form", explode=True)
    return p


ID: Schema = {"name": "id", "in": "path", "required": True, "schema": STR}
LIMIT = _query("limit", {"type": "integer", "minimum": 1, "maximum": 100})
AFTER = _query("after", STR, "the last id of the previous page")


def _json_body(name: str) -> Schema:
    return {_JSON: {"schema": ref(name)}}


def _job_action(action: str, summary: str) -> Schema:
    return {
        "post": _op(f"{action}Job", summary, _answer("the job", ref("Job")), errors=(404, 409), params=[ID])
    }


def _files() -> dict[str, Schema]:
    upload = {"multipart/form-data": {"schema": {
        "type": "object", "required": ["file", "purpose"],
        "properties": {"file": {"type": "string", "format": "binary"}, "purpose": {"const": "batch"}},
    }}}  # fmt: skip
    return {
        "/v1/files": {
            "post": _op("uploadFile", "upload a batch input file", _answer("the file", ref("File")),
                        errors=(400, 413), body=upload),
            "get": _op("listFiles", "this key's files", _answer("the files", ref("FileList")), errors=()),
        },
        "/v1/files/{id}": {
            "get": _op("getFile", "a file", _answer("the file", ref("File")), errors=(404,), params=[ID]),
            "delete": _op("deleteFile", "delete a file", _answer("deleted", ref("FileDeleted")),
                          errors=(404,), params=[ID]),
        },
        "/v1/files/{id}/content": {
            "get": _op("getFileContent", "a file's bytes", _answer("the bytes", {"type": "string"},
                       "application/octet-stream"), errors=(404,), params=[ID]),
        },
    }  # fmt: skip


def _batches() -> dict[str, Schema]:
    return {
        "/v1/batches": {
            "post": _op("createBatch", "an OpenAI batch over an uploaded file",
                        _answer("the batch", ref("Batch")), body=_json_body("BatchCreate")),
            "get": _op("listBatches", "this key's batches, newest first", _answer("a page", ref("BatchList")),
                       errors=(400,), params=[LIMIT, AFTER]),
        },
        "/v1/batches/{id}": {
            "get": _op("getBatch", "a batch", _answer("the batch", ref("Batch")), errors=(404,), params=[ID]),
        },
        "/v1/batches/{id}/cancel": {
            "post": _op("cancelBatch", "cancel a batch", _answer("the batch", ref("Batch")), params=[ID]),
        },
    }  # fmt: skip


_OTHER_LIVE = (  # path, operation id, what it makes, its answer's schema (`…Create`: its request's)
    ("/v1/embeddings", "createEmbedding", "live embeddings", "Embeddings"),
    ("/v1/responses", "createResponse", "a live Responses API answer", "Response"),
    ("/v1/completions", "createCompletion", "a live (legacy) text completion", "Completion"),
)


def _live() -> dict[str, Schema]:
    event = {"schema": {"type": "object", "required": ["data"], "properties": {"data": STR, "event": STR}}}
    chat = {_JSON: {"schema": ref("ChatCompletion")}, "text/event-stream": event}  # one event
    message = {_JSON: {"schema": ref("Message")}, "text/event-stream": event}
    answered = "the answer (`stream: true`: server-sent events); `x-batchgate-queue-ms`: its wait"
    answered_plain = "the answer (no streaming); `x-batchgate-queue-ms`: its wait"
    streamed = {
        "description": answered,
        "content": {_JSON: {"schema": ref("Response")}, "text/event-stream": event},
    }
    return {
        "/v1/chat/completions": {
            "post": _op("createChatCompletion", "a live chat completion, ahead of batch work",
                        {"description": answered, "content": chat}, errors=(400, 404, 429, 502, 503, 504),
                        body=_json_body("ChatCompletionCreate")),
        },
        **{path: {"post": _op(op_id, f"{what}, ahead of batch work", _answer(answered_plain, ref(answer)),
                              errors=(400, 404, 429, 502, 503, 504), body=_json_body(f"{answer}Create"))}
           for path, op_id, what, answer in _OTHER_LIVE},
        "/v1/responses": {"post": _op("createResponse", "a live Responses API answer, ahead of batch work",
                                      streamed, errors=(400, 404, 429, 502, 503, 504),
                                      body=_json_body("ResponseCreate"))},
        "/v1/messages": {
            "post": _op("createMessage", "a live Anthropic message, ahead of batch work",
                        {"description": answered, "content": message}, errors=(400, 404, 429, 502, 503, 504),
                        body=_json_body("MessageCreate"), anthropic=True),
        },
    }  # fmt: skip


def _message_batches() -> dict[str, Schema]:
    one = _answer("the message batch", ref("MessageBatch"))
    results = _answer("one result a line", STR, "application/x-jsonl")
    paging = [_query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
              _query("after_id", STR), _query("before_id", STR)]  # fmt: skip
    return {
        "/v1/messages/batches": {
            "post": _op("createMessageBatch", "an Anthropic message batch over inline requests", one,
                        errors=(400,), body=_json_body("MessageBatchCreate"), anthropic=True),
            "get": _op("listMessageBatches", "this key's message batches, newest first",
                       _answer("a page", ref("MessageBatchList")), errors=(400,), params=paging,
                       anthropic=True),
        },
        "/v1/messages/batches/{id}": {
            "get": _op("getMessageBatch", "a message batch", one, errors=(404,), params=[ID], anthropic=True),
        },
        "/v1/messages/batches/{id}/cancel": {
            "post": _op("cancelMessageBatch", "cancel a message batch", one, errors=(404,), params=[ID],
                        anthropic=True),
        },
        "/v1/messages/batches/{id}/results": {
            "get": _op("getMessageBatchResults", "the results of an ended batch", results,
                       errors=(400, 404), params=[ID], anthropic=True),
        },
    }  # fmt: skip


def _jobs() -> dict[str, Schema]:
    filters = [
        _query("state", {"type": "array", "items": {"enum": list(STATES)}}, "any of these states",
               explode=True),
        _query("name", STR),
        _query("priority", {"enum": ["high", "normal", "low"]}),
        _query("metadata", {"type": "array", "items": {"type": "string", "pattern": "^[^=]+=.*$"}},
               "key=value, every one must match", explode=True),
        LIMIT, AFTER,
    ]  # fmt: skip
    results = _answer(
        "finished items so far, one JSON object a line", {"type": "string"}, "application/x-ndjson"
    )
    return {
        "/v1/jobs": {
            "post": _op("createJob", "submit a job", _answer("the job", ref("Job")), status="201",
                        errors=(400, 404, 422), body=_json_body("JobCreate")),
            "get": _op("listJobs", "this key's jobs, newest first", _answer("a page", ref("JobList")),
                       errors=(400,), params=filters),
        },
        "/v1/jobs/{id}": {
            "get": _op("getJob", "a job with progress, ETA, cost and per-provider figures",
                       _answer("the job", ref("JobDetail")), errors=(404,), params=[ID]),
        },
        "/v1/jobs/{id}/cancel": _job_action("cancel", "cancel: stop, keep what finished"),
        "/v1/jobs/{id}/pause": _job_action("pause", "pause: stop gracefully, stay paused until resumed"),
        "/v1/jobs/{id}/resume": _job_action("resume", "resume a paused job"),
        "/v1/jobs/{id}/retry": _job_action("retry", "run the failed items again"),
        "/v1/jobs/{id}/results": {
            "get": _op("getJobResults", "stream the results", results, errors=(404,), params=[ID]),
        },
    }  # fmt: skip


def _example(model: str | None) -> dict[str, object]:
    """A job this server can run: one request on one of its routes."""
    line = {
        "custom_id": "example-1",
        "model": model,
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    return {"requests": [line], "name": "example", "priority": "normal", "metadata": {"source": "openapi"}}


# What each created object's id leads to: OpenAPI links, so a client (and schemathesis's stateful
# phase) can chain create → get / cancel / results with the id the server answered.
_LINKS = {
    ("/v1/jobs", "post", "201"): (
        "getJob", "cancelJob", "pauseJob", "resumeJob", "retryJob", "getJobResults",
    ),
    ("/v1/files", "post", "200"): ("getFile", "getFileContent", "deleteFile"),
    ("/v1/batches", "post", "200"): ("getBatch", "cancelBatch"),
    ("/v1/messages/batches", "post", "200"): (
        "getMessageBatch", "cancelMessageBatch", "getMessageBatchResults",
    ),
}  # fmt: skip
_BODY_LINKS = {  # an uploaded file's id as the input of a batch or a job
    ("/v1/files", "post", "200"): {
        "createBatch": {"input_file_id": "$response.body#/id", "endpoint": "/v1/chat/completions",
                        "completion_window": "24h"},
        "createJob": {"input_file_id": "$response.body#/id"},
    },
}  # fmt: skip


def _link(paths: dict[str, Any]) -> None:
    for (path, method, status), targets in _LINKS.items():
        links = paths[path][method]["responses"][status].setdefault("links", {})
        for target in targets:
            links[target] = {"operationId": target, "parameters": {"id": "$response.body#/id"}}
    for (path, method, status), bodies in _BODY_LINKS.items():
        links = paths[path][method]["responses"][status].setdefault("links", {})
        for target, body in bodies.items():
            links[target] = {"operationId": target, "requestBody": body}


def document(model: str | None = None) -> dict[str, Any]:
    """The document; `model` (one of the server's routes) makes the create example runnable."""
    jobs, live, anthropic = _jobs(), _live(), _message_batches()
    if model is not None:
        jobs["/v1/jobs"]["post"]["requestBody"]["content"][_JSON]["example"] = _example(model)
        hello = {"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}
        for path in ("/v1/chat/completions", "/v1/messages"):
            live[path]["post"]["requestBody"]["content"][_JSON]["example"] = hello
        others = {
            "/v1/embeddings": {"model": model, "input": "Hi", "dimensions": 8},
            "/v1/responses": {"model": model, "input": "Hi", "max_output_tokens": 5},
            "/v1/completions": {"model": model, "prompt": "Hi", "max_tokens": 5},
        }
        for path, example in others.items():
            live[path]["post"]["requestBody"]["content"][_JSON]["example"] = example
        batch = {"requests": [{"custom_id": "example-1", "params": hello}]}
        anthropic["/v1/messages/batches"]["post"]["requestBody"]["content"][_JSON]["example"] = batch
    paths = {**jobs, **_files(), **_batches(), **live, **anthropic}
    _link(paths)
    return {
        "openapi": "3.1.0",
        "info": {"title": "batchgate serve", "version": "1"},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
            },
        },
    }


def routes(model: str | None = None) -> list[web.RouteDef]:
    body = orjson.dumps(document(model))

    async def serve(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    return [web.get("/openapi.json", serve)]
