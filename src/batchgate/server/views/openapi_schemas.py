"""The JSON Schemas of what the service answers (OpenAPI 3.1 components): the error bodies, OpenAI's
file and batch objects, the job API's objects (`job_view`), the live proxy's requests and answers
and Anthropic's message batches. They describe what the code really
returns; the schemathesis test checks every answer against them."""

from __future__ import annotations

from typing import Any

from batchgate.config.job_spec import (
    MAX_METADATA_KEY,
    MAX_METADATA_KEYS,
    MAX_METADATA_VALUE,
    MAX_TIME,
    MODES,
    PRIORITIES,
)
from batchgate.server.batch_api.shapes import ENDPOINTS, TIME_FIELDS
from batchgate.server.job_api.job_table import STATES

Schema = dict[str, Any]
BATCH_STATUSES = ("validating", "in_progress", "finalizing", "completed", "failed", "expired",
                  "cancelling", "cancelled")  # fmt: skip


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    return {"type": "object", "required": list(required), "properties": {**required, **(optional or {})}}


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
STRINGS: Schema = {"type": "object", "additionalProperties": STR}
METADATA: Schema = {  # OpenAI's limits, checked at the door (`job_spec.metadata`)
    "type": "object",
    "maxProperties": MAX_METADATA_KEYS,
    "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY},
    "additionalProperties": {"type": "string", "maxLength": MAX_METADATA_VALUE},
}


def page_of(item: str) -> Schema:
    return obj({
        "object": {"const": "list"}, "data": {"type": "array", "items": ref(item)},
        "first_id": nullable(STR), "last_id": nullable(STR), "has_more": {"type": "boolean"},
    })  # fmt: skip


ERROR = obj({"error": obj({"message": STR, "type": STR, "param": nullable(STR), "code": nullable(STR)})})

FILE = obj({
    "id": STR, "object": {"const": "file"}, "bytes": INT, "created_at": INT, "filename": STR,
    "purpose": STR, "status": STR, "status_details": {"type": "null"}, "expires_at": {"type": "null"},
})  # fmt: skip

DELETED = obj({"id": STR, "object": {"const": "file"}, "deleted": {"const": True}})

BATCH_ERROR = obj({"code": STR, "message": STR}, {"line": nullable(INT), "param": nullable(STR)})

BATCH = obj({
    "id": STR, "object": {"const": "batch"}, "endpoint": STR,
    "errors": nullable(obj({"object": {"const": "list"}, "data": {"type": "array", "items": BATCH_ERROR}})),
    "input_file_id": STR, "completion_window": STR, "status": {"enum": list(BATCH_STATUSES)},
    "output_file_id": nullable(STR), "error_file_id": nullable(STR), "created_at": INT, "expires_at": INT,
    **{k: nullable(INT) for k in TIME_FIELDS},
    "request_counts": obj({"total": INT, "completed": INT, "failed": INT}),
    "usage": obj({
        "input_tokens": INT, "input_tokens_details": obj({"cached_tokens": INT}), "output_tokens": INT,
        "output_tokens_details": obj({"reasoning_tokens": INT}), "total_tokens": INT,
    }),
    "metadata": nullable(METADATA),
})  # fmt: skip

BATCH_CREATE = obj(
    {
        "input_file_id": STR,
        "endpoint": {"enum": list(ENDPOINTS)},
        "completion_window": {"const": "24h"},
    },
    {"metadata": nullable(METADATA)},
)

TIME: Schema = {
    "anyOf": [
        {"type": "string", "format": "date-time"},
        {"type": "number", "minimum": 0, "exclusiveMaximum": MAX_TIME},
    ]
}
VALIDATE = {
    "type": "object",
    "properties": {"regex": STR, "schema": {"type": "object"}},
    "minProperties": 1,
    "additionalProperties": False,
}

JOB_CREATE: Schema = {
    "type": "object",
    "additionalProperties": False,
    "description": "Exactly one of `input_file_id` (an uploaded file, purpose `batch`) and `requests`.",
    "properties": {
        "input_file_id": STR,
        "requests": {"type": "array", "minItems": 1, "items": {"type": "object"}},
        "name": {"type": "string", "minLength": 1, "maxLength": 256},
        "priority": {"enum": list(PRIORITIES)},
        "not_before": TIME,
        "deadline": {"anyOf": [TIME, obj({"hours": {"type": "number", "exclusiveMinimum": 0}})]},
        "callback_url": {"type": "string", "format": "uri"},
        "metadata": METADATA,
        "budget": {"type": "number", "exclusiveMinimum": 0},
        "mode": {"enum": list(MODES)},
        "validate": VALIDATE,
    },
}

COUNTS = obj({"total": INT, "succeeded": INT, "failed": INT, "pending": INT})

JOB = obj({
    "id": STR, "object": {"const": "job"}, "name": nullable(STR), "state": {"enum": list(STATES)},
    "priority": {"enum": list(PRIORITIES)}, "created_at": INT,
    "not_before": nullable(STR), "deadline": nullable(STR), "mode": nullable({"enum": list(MODES)}),
    "budget": nullable(NUM), "callback_url": nullable(STR), "metadata": STRINGS,
    "validate": nullable(obj({"regex": nullable(STR), "schema": nullable({"type": "object"})})),
    "input_file_id": nullable(STR), "request_counts": COUNTS,
    "errors": nullable({"type": "array", "items": {"type": "object"}}),
    "times": {"type": "object", "additionalProperties": INT},
}, {"requeued": INT})  # fmt: skip

PROVIDER = obj({
    "succeeded": INT, "failed": INT, "attempts": INT, "prompt_tokens": INT, "completion_tokens": INT,
    "cost_usd": NUM,
})  # fmt: skip

JOB_DETAIL: Schema = {
    "allOf": [
        ref("Job"),
        obj({
            "progress": obj({**COUNTS["properties"], "rate_per_s": nullable(NUM), "eta_s": nullable(NUM)}),
            "cost_usd": NUM,
            "tokens": obj({"prompt": INT, "completion": INT}),
            "providers": {"type": "object", "additionalProperties": PROVIDER},
        }),
    ]
}  # fmt: skip

SCHEMAS: dict[str, Schema] = {
    "Error": ERROR,
    "File": FILE,
    "FileList": page_of("File"),
    "FileDeleted": DELETED,
    "Batch": BATCH,
    "BatchList": page_of("Batch"),
    "BatchCreate": BATCH_CREATE,
    "JobCreate": JOB_CREATE,
    "Job": JOB,
    "JobDetail": JOB_DETAIL,
    "JobList": page_of("Job"),
}

# -- the live proxy (`live`) and Anthropic's Message Batches (`anthropic_api`) -----------------------

ANTHROPIC_ERROR = obj({"type": {"const": "error"}, "error": obj({"type": STR, "message": STR})})

ROLE_MESSAGE = obj({"role": {"enum": ["system", "user", "assistant"]}, "content": STR})

CHAT_CREATE = obj(
    {"model": STR, "messages": {"type": "array", "minItems": 1, "items": ROLE_MESSAGE}},
    {
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": 4096},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "stream": {"type": "boolean"},
    },
)

CHAT_COMPLETION = obj({
    "id": STR, "object": STR, "created": INT, "model": STR,
    "choices": {"type": "array", "items": obj({
        "index": INT, "message": obj({"role": STR, "content": nullable(STR)}),
        "finish_reason": nullable(STR),
    })},
    "usage": obj({"prompt_tokens": INT, "completion_tokens": INT, "total_tokens": INT}),
})  # fmt: skip

TEXT = {"type": "string", "minLength": 1}
MAX_OUT = {"type": "integer", "minimum": 1, "maximum": 4096}
USAGE = obj({"prompt_tokens": INT, "completion_tokens": INT, "total_tokens": INT})

TEXTS = {"type": "array", "minItems": 1, "maxItems": 2048, "items": TEXT}  # ≤ 2,048 inputs a request
EMBEDDING_CREATE = obj(
    {"model": STR, "input": {"anyOf": [TEXT, TEXTS]}},
    {
        "dimensions": {"type": "integer", "minimum": 1, "maximum": 1536},
        "encoding_format": {"enum": ["float", "base64"]},
    },
)

EMBEDDINGS = obj({
    "object": {"const": "list"}, "model": STR,
    "data": {"type": "array", "items": obj({
        "object": {"const": "embedding"}, "index": INT,
        "embedding": {"anyOf": [{"type": "array", "items": NUM}, STR]},  # float, or base64 float32
    })},
    "usage": obj({"prompt_tokens": INT, "total_tokens": INT}),
})  # fmt: skip

RESPONSE_CREATE = obj(
    {"model": STR, "input": {"anyOf": [TEXT, {"type": "array", "minItems": 1, "items": ROLE_MESSAGE}]}},
    {"instructions": STR, "max_output_tokens": MAX_OUT},
)

RESPONSE = obj({
    "id": STR, "object": {"const": "response"}, "status": STR, "model": STR,
    "output": {"type": "array", "items": {"type": "object"}},
    "usage": obj({"input_tokens": INT, "output_tokens": INT, "total_tokens": INT}),
}, {"incomplete_details": nullable(obj({"reason": STR}))})  # fmt: skip

COMPLETION_CREATE = obj(
    {"model": STR, "prompt": {"anyOf": [TEXT, {"type": "array", "minItems": 1, "items": TEXT}]}},
    {"max_tokens": MAX_OUT},
)

COMPLETION = obj({
    "id": STR, "object": STR, "created": INT, "model": STR,
    "choices": {"type": "array", "items": obj({"index": INT, "text": STR, "finish_reason": nullable(STR)})},
    "usage": USAGE,
})  # fmt: skip

MESSAGE_CREATE = obj(
    {
        "model": STR,
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": 4096},
        "messages": {"type": "array", "minItems": 1, "items": obj({"role": {"enum": ["user", "assistant"]},
                                                                  "content": STR})},
    },
    {"system": STR, "temperature": {"type": "number", "minimum": 0, "maximum": 1},
     "stream": {"type": "boolean"}},
)  # fmt: skip

MESSAGE = obj({
    "id": STR, "type": {"const": "message"}, "role": {"const": "assistant"}, "model": STR,
    "content": {"type": "array", "items": obj({"type": {"const": "text"}, "text": STR})},
    "stop_reason": nullable(STR), "stop_sequence": nullable(STR),
    "usage": obj({"input_tokens": INT, "output_tokens": INT}),
})  # fmt: skip

MESSAGE_BATCH_CREATE = obj({
    "requests": {"type": "array", "minItems": 1, "items": obj({
        "custom_id": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"}, "params": ref("MessageCreate"),
    })},
})  # fmt: skip

_ISO = {"type": "string", "format": "date-time"}
MESSAGE_BATCH = obj({
    "id": STR, "type": {"const": "message_batch"},
    "processing_status": {"enum": ["in_progress", "canceling", "ended"]},
    "request_counts": obj(dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), INT)),
    "ended_at": nullable(_ISO), "created_at": _ISO, "expires_at": _ISO, "archived_at": {"type": "null"},
    "cancel_initiated_at": nullable(_ISO), "results_url": nullable(STR),
})  # fmt: skip

MESSAGE_BATCH_LIST = obj({
    "data": {"type": "array", "items": ref("MessageBatch")}, "has_more": {"type": "boolean"},
    "first_id": nullable(STR), "last_id": nullable(STR),
})  # fmt: skip

SCHEMAS.update({
    "AnthropicError": ANTHROPIC_ERROR,
    "ChatCompletionCreate": CHAT_CREATE,
    "ChatCompletion": CHAT_COMPLETION,
    "EmbeddingCreate": EMBEDDING_CREATE,
    "Embeddings": EMBEDDINGS,
    "ResponseCreate": RESPONSE_CREATE,
    "Response": RESPONSE,
    "CompletionCreate": COMPLETION_CREATE,
    "Completion": COMPLETION,
    "MessageCreate": MESSAGE_CREATE,
    "Message": MESSAGE,
    "MessageBatchCreate": MESSAGE_BATCH_CREATE,
    "MessageBatch": MESSAGE_BATCH,
    "MessageBatchList": MESSAGE_BATCH_LIST,
})  # fmt: skip
