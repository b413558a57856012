"""A batch's output and error files at its end, in OpenAI's line shape, written from the job
store: a succeeded request to the output file, a failed one or one the batch's end left unsent
(cancelled, expired, stopped) to the error file."""

from __future__ import annotations

from batchgate.jobs.store.protocol import JobStore, TaskState
from batchgate.server.batch_api.files import Files
from batchgate.server.batch_api.shapes import derived_id, output_line, unsent_line
from batchgate.server.tenancy.registry import BatchRecord


async def write_batch_files(store: JobStore, files: Files, b: BatchRecord) -> None:
    """The batch's output and error files, in OpenAI's line shape, from the store."""
    out, err = (files.writer(derived_id("file-", b.id, kind)) for kind in ("output", "error"))
    try:
        why = "cancelled" if b.cancel_asked else "expired" if b.expired else "stopped"
        async for t in store.iter_results(b.job_id, ordered=True):
            if t.state is TaskState.SUCCEEDED:
                out.write(output_line(t.output_line, t.custom_id, t.error))
            elif t.state is TaskState.FAILED:
                err.write(output_line(t.output_line, t.custom_id, t.error))
            else:  # never finished: OpenAI's line for a request the batch's end left out
                err.write(unsent_line(t.custom_id, why))
        b.output_file_id = out.commit(b.owner, f"{b.id}_output.jsonl")
        b.error_file_id = err.commit(b.owner, f"{b.id}_error.jsonl")
    finally:
        out.discard()
        err.discard()
