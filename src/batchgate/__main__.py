"""`python -m batchgate` runs the command line."""

import sys

from batchgate.cli import main

sys.exit(main())
