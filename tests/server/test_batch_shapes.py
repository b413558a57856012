"""The OpenAI batch object as `batch_object` builds it: the keys its TypedDict names, its time
fields those of `TIME_FIELDS` (which the OpenAPI document lists), in that order."""

from __future__ import annotations

from batchgate.server.batch_api.shapes import TIME_FIELDS, BatchObject, batch_object
from batchgate.server.tenancy.registry import BatchRecord


def test_a_batch_object_has_its_typed_keys_and_the_time_fields_in_order() -> None:
    record = BatchRecord(
        id="batch_1",
        owner="key_1",
        input_file_id="file-1",
        endpoint="/v1/chat/completions",
        completion_window="24h",
        created_at=100,
        job_id="job_1",
        times={"in_progress_at": 101, "cancelled_at": 105},
    )
    made = batch_object(record, {"total": 2, "completed": 1, "failed": 0})
    assert list(made) == list(BatchObject.__annotations__)
    times = [k for k in made if k.endswith("_at") and k not in ("created_at", "expires_at")]
    assert tuple(times) == TIME_FIELDS
    assert (made["in_progress_at"], made["cancelled_at"], made["completed_at"]) == (101, 105, None)
