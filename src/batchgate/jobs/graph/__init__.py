"""Fan-out and pipeline jobs: the graph of steps (`spec`), its safe templates (`template`), its input
items (`inputs`), which tasks are ready when (`expand`), and the joined output and step comparison
(`join`, `output`). The engine runs the tasks like any others; only their creation and their output
differ."""
