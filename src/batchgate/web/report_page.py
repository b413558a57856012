"""`batchgate report JOB --html OUT.html`: one self-contained page — the job page's charts and
tables with the CSS, the chart library and the page's module inlined and the data embedded as
JSON — written from the job store, atomically (a temporary file renamed into place)."""

from __future__ import annotations

import contextlib
import html
import os
from pathlib import Path
from typing import cast

import orjson

from batchgate.errors import JobError
from batchgate.jobs.store.protocol import JobRecord, JobStore
from batchgate.web.assets import read_asset
from batchgate.web.job_page import PageData, page_data

DATA_ID = "bg-data"
_START = (
    "renderJob(document.getElementById('job'), "
    f"JSON.parse(document.getElementById('{DATA_ID}').textContent));"
)


def _inline(name: str) -> str:
    text = read_asset(name).decode("utf-8")
    if "</script" in text.lower() or "</style" in text.lower():
        raise JobError(f"{name}: cannot be inlined (it closes its own tag)")
    return text


def render_page(data: PageData) -> str:
    """The page's HTML; `data` is embedded in a JSON script element (`<` escaped)."""
    embedded = orjson.dumps(data).decode("utf-8").replace("<", "\\u003c")
    title = html.escape(f"batchgate job {data['job']}")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{_inline("vendor/uPlot.min.css")}</style>
<style>{_inline("style.css")}</style>
</head>
<body>
<header class="top"><h1>{title}</h1><span class="muted">written by batchgate report --html</span></header>
<main id="job" class="page"></main>
<script type="application/json" id="{DATA_ID}">{embedded}</script>
<script>{_inline("vendor/uPlot.iife.min.js")}</script>
<script type="module">
{_inline("jobview.js")}
{_START}
</script>
</body>
</html>
"""


def embedded_data(page: str) -> PageData:
    """The data a page written by `render_page` embeds (for checking it against the store)."""
    start = page.index(f'id="{DATA_ID}">') + len(f'id="{DATA_ID}">')
    data = orjson.loads(page[start : page.index("</script>", start)])
    assert isinstance(data, dict)
    return cast("PageData", data)


async def write_report_page(store: JobStore, job: JobRecord, state: str, path: Path) -> None:
    """Write the job's page to `path` (a one-line JobError if the folder is not writable)."""
    page = render_page(await page_data(store, job, state))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # owner-only, like every artefact
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise JobError(f"{path}: cannot write the page ({exc.strerror})") from None
