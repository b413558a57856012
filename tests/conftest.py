"""Settings for the whole suite: under CI (`CI=true`) hypothesis draws the same examples on every
run (`derandomize`), so a red CI run names a property that fails, not a random draw; on a
developer's machine it keeps exploring new examples each run."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() == "true":
    settings.load_profile("ci")
