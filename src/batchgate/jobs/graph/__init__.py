"""Fan-out and pipeline jobs: the graph of steps (`spec`), its safe templates (`template`), its input
items (`inputs`), which tasks are ready when (`expand`), the joined output and step comparison
(`join`, `output`), and the set-up a run needs (`setup`). The engine runs the tasks like any
others; only their creation and their output differ.

May import: the core, `config`, `stats`, `jobs.input`, `jobs.output`, `jobs.checks` (a step's
output check) and `jobs.store`.
Not the engine, batch mode or the gateway.
"""
