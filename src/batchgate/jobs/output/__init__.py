"""What a job writes: the OUT lines and the errors file (`files`), written atomically at the end;
OUT appended as results commit (`live`); the one builder of a task's outcome and OUT line, live or
batch (`outcome`); and never writing over a file the run reads (`same_file`).

May import: the core, `batchgate.jobs.input`, `batchgate.jobs.store`. Not the engine, batch mode or
the gateway.
"""
