"""`python bench/launch.py STATS.json -- CMD...`: run CMD and write its CPU time and peak RSS.

A small process between the benchmark and each system: Linux carries a process's RSS high-water
mark across `exec`, so a child forked straight from the (large) benchmark process would report the
benchmark's RSS as its own peak. Forked from this small launcher, CMD's `ru_maxrss` is its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def main(argv: list[str]) -> int:
    stats_path, sep, *cmd = argv
    if sep != "--" or not cmd:
        print("usage: launch.py STATS.json -- CMD...", file=sys.stderr)
        return 2
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    with open(stats_path, "w") as f:
        json.dump(
            {"returncode": code, "cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss}, f
        )
    return code if code >= 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
