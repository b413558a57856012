"""The output check: a model's answer against the job's expectation (`output_check`), a regular
expression or a JSON Schema compiled once as data that reaches nothing (`schema_check`), patterns
run on an engine with a time limit (`safe_regex`) after their size is bounded (`pattern_size`).

May import: `batchgate.errors`. Not the engine, batch mode or the gateway.
"""
