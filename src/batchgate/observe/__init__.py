"""Watching a run from outside: where the structured log events go (`logsetup`: text or JSON
lines, stderr or a file) and the Prometheus metrics (`metrics`: a collector that reads the figures
a job keeps anyway, at scrape time; `exporter`: `/metrics` served on the run's event loop).

`prometheus_client` is the optional `metrics` extra: only `metrics` and `exporter` import it, and
only a run that asks for metrics imports them. A server (`batchgate serve`) serves the same
families from its shared gateway: `metrics.server_registry(source)` over a `server_view.ServerView`
(plain values, no Prometheus), and `metrics.exposition(registry)`. `tracing/` exports OpenTelemetry
spans (the optional `otel` extra), installed in `batchgate.trace_hooks` by a run or server that
traces.

May import: `batchgate.jobs`, `batchgate.gateway`, `batchgate.stats`, `batchgate.logs` and what lies
below them; cli (and a server) import it.
"""
