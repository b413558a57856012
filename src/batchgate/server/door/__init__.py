"""What a request may carry, checked at the door before any route reads it: each route class's
body bound (`body_limits`: 413 before the body is read), a create route's JSON object
(`request_body`), a URL's path and query values (`query`), a job option's refusal and metadata's
limits (`job_fields`, from the one job-spec parser in `config.job_spec`); what one client's
connections may hold (`connections`: read timeouts, a cap per address).

May import: `errors`, `config` (the job spec), `clock`, `logs` and aiohttp; never another server
package (every route imports it).
"""
