"""Suite-wide settings: Hypothesis's profiles.

The suite gates a landing, so by default every property test draws the same examples on every
run (`derandomize`: a seed fixed per test, no example database) and no example is timed (no
`deadline`: this machine is shared) — a test passes or fails by the code, never by the draw or
the load (issue 46). `HYPOTHESIS_PROFILE=random ./scripts/test …` (or pytest's
`--hypothesis-profile=random`) draws fresh examples on each run, for hunting new counter-examples
locally or nightly; a find is pinned with `@example` before it lands.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("derandomized", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("random", derandomize=False, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "derandomized"))
