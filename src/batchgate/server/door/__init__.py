"""What a request may carry, checked at the door before any route reads it: each route class's
body bound (`body_limits`: 413 before the body is read), a create route's JSON object
(`request_body`), a URL's path and query values (`query`), a job option's refusal and metadata's
limits (`job_fields`, from the one job-spec parser in `config.job_spec`).

May import: errors, config (the job spec) and aiohttp; never another server package (every route
imports it).
"""
