"""The job report: a JSON account of each run merged across a resumed job's runs, and its summary
table (`summary`); the per-provider figures from the gateway's counters or the job's own tallies
(`provider_figures`); batch mode's figures (`batch_figures`); the documents' types and
serializers (`shapes`).

May import: the core, `batchgate.config`, `batchgate.stats`, `batchgate.jobs.cache`,
`batchgate.jobs.progress`, `batchgate.jobs.store`. Not the engine, batch mode or the gateway.
"""
