"""The web dashboard's assets and the job page's data: plain HTML, ES modules and CSS under
`static/` (served by `batchgate serve` at `/`; no build step), the vendored chart library
(`static/vendor/`: uPlot 1.6.32, MIT, its licence beside it), what a job's page shows
(`job_page.page_data`: figures, report, timeline, failures — read from the job store) and
`batchgate report --html`'s self-contained page (`report_page`).

May import: `batchgate.jobs` and what lies below it; server and cli import it.
"""
