"""OpenTelemetry traces (the optional `otel` extra): a span per request, per job and per provider
batch, exported by OTLP/HTTP where the standard `OTEL_*` variables say.

`setup` builds the SDK's tracer provider and exporter and installs the tracer in
`batchgate.trace_hooks` (the request path's no-op hooks); `spans` is that tracer: a request's
span (route, target, tokens, cost, time waiting for quota; attempts as child spans with their
status and retry cause when there were several), a job's and a batch's; `middleware` adopts a
`batchgate serve` client's `traceparent`. Only `setup` and `spans` import `opentelemetry`, and
only a run or a server that asks for tracing imports them (`--trace`, `tracing:`).

May import: `batchgate.trace_hooks`, `batchgate.jobs` (its price table), `batchgate.config` and what
lies below them; cli and the server import it.
"""
