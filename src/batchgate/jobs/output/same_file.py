"""Never writing over what a run reads: a file batchgate would write (the output, the errors file,
the report, the job store, a log file, a `report --html` page) that is the input, the config or any
other file the run reads is refused before anything is written. "The same file" is the same device
and inode, whatever the paths say (a symlink, a hard link, `./x` beside `x`); a path that does not
exist yet is no file anybody reads. And an output's folder checked writable before a run starts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from batchgate.errors import JobError

Paths = Mapping[str, Path | str | None]  # what each file is ("--output", "input") → its path


def same_file(a: Path, b: Path) -> bool:
    """Whether both paths exist and are one file (device and inode)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _named(paths: Paths) -> list[tuple[str, Path]]:
    """The entries that are files on this machine (None and postgresql:// URLs left out)."""
    return [(k, Path(v)) for k, v in paths.items() if isinstance(v, Path)]


def refuse_overwrite(writes: Paths, reads: Paths) -> None:
    """A one-line `JobError` when a file in `writes` is a file in `reads` (the same inode) or two
    entries of `writes` are one path: nothing has been written yet, and nothing will be."""
    named_writes = _named(writes)
    for what, path in named_writes:
        for other, read in _named(reads):
            if other != what and same_file(path, read):
                raise JobError(
                    f"{path}: the {what} would overwrite the {other} ({read}), a file this run reads; "
                    "choose another path (nothing was written)"
                )
    for i, (what, path) in enumerate(named_writes):
        for other, second in named_writes[:i]:
            if same_file(path, second) or path.resolve() == second.resolve():
                raise JobError(
                    f"{path}: the {what} and the {other} are the same file; choose another path "
                    "(nothing was written)"
                )


def check_output_writable(path: Path) -> None:
    parent = path.resolve().parent
    if not parent.is_dir():
        raise JobError(f"{path}: cannot write output: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise JobError(f"{path}: cannot write output: directory {parent} is not writable")
    if path.exists() and path.is_dir():
        raise JobError(f"{path}: cannot write output: it is a directory")
