"""docs/architecture.md's "The walk, counted" is the code's: the files one request of a
`batchgate run` passes through, as `bench/hot_path.py --walk` counts them (issue 44: the
request-path list was written by hand and went stale). A file whose functions run at least
`LISTED` times a request must be listed; a listed file must run at least `KEPT` times a request
(the margins keep a function entered about once a request from flipping the check)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
LISTED, KEPT = 1.2, 0.6
FIX = "rewrite it: python bench/hot_path.py --walk --docs docs/architecture.md"

pytestmark = pytest.mark.slow  # two traced runs of `batchgate run` (a few seconds)


def _listed() -> set[str]:
    block = re.search(r"<!-- walk[^\n]*-->\n(.*?)<!-- /walk -->", DOC.read_text(encoding="utf-8"), re.S)
    assert block is not None, f"{DOC}: no walk block"
    return set(re.findall(r"`([\w/]+\.py)`", block.group(1)))


def _walk(listing: str) -> str:
    """What `bench/hot_path.py --walk <listing>` prints of this checkout's `src`."""
    argv = [
        sys.executable,
        str(ROOT / "bench" / "hot_path.py"),
        "--walk",
        listing,
        "--trees",
        str(ROOT / "src"),
    ]
    done = subprocess.run(argv, capture_output=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode()


def test_the_documented_walk_is_the_request_path() -> None:
    rates: dict[str, float] = orjson.loads(_walk("--json").splitlines()[-1])
    listed = _listed()
    missing = sorted(f for f, rate in rates.items() if rate >= LISTED and f not in listed)
    stale = sorted(f for f in listed if rates.get(f, 0.0) < KEPT)
    assert missing == [], f"on the path, not in the doc: {missing}; {FIX}"
    assert stale == [], f"in the doc, not on the path: {stale}; {FIX}"
    assert len(listed) >= 10  # the block was read


POOL_ENTRIES = 12  # issue 44: the pool entered at most this many times a request (it was 21)


def test_one_request_enters_the_quota_pool_at_most_twelve_times() -> None:
    printed = _walk("--functions")
    rows = [line.split() for line in printed.splitlines() if "quota/pool.py::" in line]
    entries = {row[1]: float(row[0]) for row in rows}
    assert "quota/pool.py::QuotaPool.settle" in entries, printed[-2000:]  # the list was read
    assert sum(entries.values()) <= POOL_ENTRIES, (
        f"the pool entered {sum(entries.values()):.1f} times: {entries}"
    )
