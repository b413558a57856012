"""Where each custom_id first appeared in the input, for finding duplicates in millions of lines.

A dict of a million custom_id strings to line numbers costs ~125 MB of Python objects; this table
keeps, per id, only 32 bits of its hash and its line number (8 bytes, in flat arrays), found
through an open-addressing index of 4-byte entries (linear probing, at most two-thirds full):
~15 MB for a million ids, ~150 MB for ten million. Ids may share those 32 bits, so a match is
confirmed by `same_id(line_no, custom_id)` (the caller re-reads that line): the answer is exact,
and re-reading happens only for real duplicates (and, about once in 4 x 10^9 comparisons, a
collision).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

_EMPTY = -1
_MIN_SLOTS = 1 << 12
_LOW32 = 0xFFFFFFFF


class FirstLines:
    """custom_id -> the line of its first occurrence; `same_id(line_no, custom_id)` says whether
    line `line_no` carries `custom_id`."""

    __slots__ = ("_hash", "_hashes", "_index", "_lines", "_mask", "_same_id")

    def __init__(self, same_id: Callable[[int, str], bool], hash_id: Callable[[str], int] = hash) -> None:
        self._same_id = same_id
        self._hash = hash_id
        self._hashes = array("I")  # entry -> the low 32 bits of its hash, in insertion order
        self._lines = array("I")  # entry -> its line (widened to 64 bits past 2^32 - 1)
        self._index = array("i", [_EMPTY]) * _MIN_SLOTS  # slot -> entry
        self._mask = _MIN_SLOTS - 1

    def __len__(self) -> int:
        return len(self._hashes)

    def first_line(self, custom_id: str, line_no: int) -> int | None:
        """None if `custom_id` is new (it is recorded at `line_no`); else the line on which it
        first appeared."""
        h = self._hash(custom_id) & _LOW32
        index, hashes, mask = self._index, self._hashes, self._mask
        i = h & mask
        while (entry := index[i]) != _EMPTY:
            if hashes[entry] == h and self._same_id(self._lines[entry], custom_id):
                return self._lines[entry]
            i = (i + 1) & mask
        index[i] = len(hashes)
        hashes.append(h)
        try:
            self._lines.append(line_no)
        except OverflowError:  # a file of more than four billion lines
            self._lines = array("q", self._lines)
            self._lines.append(line_no)
        if 3 * len(hashes) > 2 * mask:
            self._grow()
        return None

    def _grow(self) -> None:
        size = 2 * (self._mask + 1)
        index = array("i", [_EMPTY]) * size
        mask = size - 1
        for entry, h in enumerate(self._hashes):
            i = h & mask
            while index[i] != _EMPTY:
                i = (i + 1) & mask
            index[i] = entry
        self._index, self._mask = index, mask

    def __repr__(self) -> str:
        return f"FirstLines({len(self)} ids in {self._mask + 1} slots)"
