"""A running job's figures and how they are shown: the counters (`counters`) and their snapshot,
read by `batchgate status` (`snapshot`; its documents typed in `shapes`), the sinks (`counters`),
the ETA (`eta`), the live rich display (`live_display`) or plain lines off a terminal
(`progress_lines`), and the timeline of samples the charts draw (`timeline`).

May import: the core, `batchgate.stats`, `batchgate.jobs.store`. Not the engine, batch mode or the
gateway.
"""
