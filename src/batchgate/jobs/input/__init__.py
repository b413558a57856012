"""What a job reads: the JSONL input file read and validated (`read`), its accepted line shapes
normalised to one body (`shapes`), the compact table that finds a duplicate custom_id
(`first_lines`), its bad lines told (`problems`) and the lines `--skip-invalid` left out, kept for
the errors file (`skipped`). Storing the input behind the sending is `jobs.ingest`.

May import: the core, `batchgate.jobs.store`. Not the engine, batch mode or the gateway.
"""
