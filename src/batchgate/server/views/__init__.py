"""What the server shows besides its APIs: the web dashboard and its JSON (`dashboard`), the
providers page's quota samples (`quota_ring`), `GET /metrics` (`metrics_route`) and the OpenAPI
document at `/openapi.json` (`openapi`, `openapi_schemas`).

May import: `job_api`, `batch_api`, `tenancy`, `door`, `observe`, `web`, `jobs`, `gateway` and
everything below them.
"""
