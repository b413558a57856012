"""What a request may carry, checked at the door before any route reads it: each route class's
body bound (`body_limits`: 413 before the body is read), a create route's JSON object
(`request_body`), a URL's path and query values (`query`).

May import: errors and aiohttp; never another server package (every route imports it).
"""
