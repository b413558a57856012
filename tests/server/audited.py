"""`python tests/server/audited.py EVENTS ARGS...`: `batchgate ARGS...` run with an audit hook
(`sys.addaudithook`) that appends to EVENTS, one tab-separated line each, every file it opens
(`open`; SQLite's own files as `sqlite3.connect`), every socket it connects or name it resolves,
and every process it starts — what the hostile-tenant fuzz test checks a server reached."""

from __future__ import annotations

import os
import runpy
import sys
import threading
from typing import Any

_WATCHED = {"open", "sqlite3.connect", "socket.connect", "socket.getaddrinfo", "subprocess.Popen",
            "os.system", "os.exec", "os.posix_spawn"}  # fmt: skip


def main() -> None:
    events, argv = sys.argv[1], sys.argv[2:]
    log = open(events, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 — open for the process's life
    lock = threading.Lock()

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event not in _WATCHED:
            return
        if event == "open" and not isinstance(args[0], str | bytes):
            return  # a file descriptor: its file was opened (and recorded) before
        if event in ("open", "sqlite3.connect"):
            what = os.fsdecode(args[0]) if isinstance(args[0], str | bytes | os.PathLike) else repr(args[0])
        elif event == "socket.connect":
            what = repr(args[1])
        elif event == "socket.getaddrinfo":
            what = repr(args[:2])
        else:
            what = repr(args[:2])
        with lock:
            log.write(f"{event}\t{what}\n")

    sys.addaudithook(hook)
    sys.argv = ["batchgate", *argv]
    runpy.run_module("batchgate", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
