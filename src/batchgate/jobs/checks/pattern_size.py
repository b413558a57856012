"""The bound a pattern must keep before it is compiled (issue 40): the `regex` engine expands a
counted repeat into copies of its body while compiling, holding the GIL — `a{2000000}` (ten
bytes) took 0.6–1.5 s and kept ~277 MB, `a{4294967294}` ended in a `MemoryError` after seconds.
So a tenant's pattern is measured first, from its text alone, in time linear in its length:

- no counted repeat (`{m}`, `{m,n}`, `{m,}`, `{,n}`) may exceed `MAX_REPEAT` (RE2's own bound);
- the size it expands to — each atom counted once, a group as the sum of its parts, a counted
  repeat multiplying what it repeats — may not exceed `MAX_SIZE` (compiling 10,000 atoms takes
  a few milliseconds on this machine).

The measure reads groups, escapes and sets as the engine does in its default (version 0) syntax.
Where a pattern turns on verbose mode (`#` comments could hide a bracket) or version 1 (nested
sets), it takes the cruder bound that no bracket can fool: the pattern's length times every
counted repeat in it. `PatternTooLarge` (a `ValueError`) says which bound was passed.
"""

from __future__ import annotations

import re

MAX_REPEAT = 1000
MAX_SIZE = 10_000

_REPEAT = re.compile(r"\{(\d*)(?:,(\d*))?\}")
_LOOSE_REPEAT = re.compile(r"\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}")  # verbose mode allows spaces
_BRACED_ESCAPE = re.compile(r"\{[^{}]*\}")  # \p{L}, \x{41}, \N{name}: never a repeat
_LOOSE_FLAGS = re.compile(r"\(\?[a-zA-Z^-]*[xV]")  # an inline verbose or version flag, anywhere


class PatternTooLarge(ValueError):
    """A pattern past `MAX_REPEAT` or `MAX_SIZE`, refused before the engine compiles it."""


def check_size(pattern: str) -> None:
    """Raise `PatternTooLarge` when compiling `pattern` could expand past the bounds."""
    if _LOOSE_FLAGS.search(pattern):
        _check_flat(pattern)
    else:
        _Measure(pattern).run()


def _count(match: re.Match[str]) -> int:
    """The most copies a repeat's `{m,n}` asks for (1 for an open `{m,}` with no m, as `*`)."""
    low, high = match.group(1), match.group(2)
    count = max(int(low or 0), int(high or 0), 1)
    if count > MAX_REPEAT:
        raise PatternTooLarge(f"a repeat count of {count} is over {MAX_REPEAT}")
    return count


def _check_flat(pattern: str) -> None:
    size = max(len(pattern), 1)
    for match in _LOOSE_REPEAT.finditer(pattern):
        size *= _count(match)
        if size > MAX_SIZE:
            raise PatternTooLarge(f"the pattern expands past {MAX_SIZE} atoms")


class _Measure:
    """One left-to-right pass: a frame per open group, each holding its size so far and the
    size of its last atom (what a following repeat multiplies)."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.frames: list[list[int]] = [[0, 0]]  # [size, last atom's size]

    def run(self) -> None:
        p, i = self.p, 0
        while i < len(p):
            i = self._step(p[i], i)
        total = sum(size for size, _ in self.frames)  # unclosed groups the engine refuses anyway
        if total > MAX_SIZE:
            raise PatternTooLarge(f"the pattern expands past {MAX_SIZE} atoms")

    def _step(self, c: str, i: int) -> int:
        frame = self.frames[-1]
        if c == "\\":
            return self._atom(self._escape_end(i))
        if c == "[":
            return self._atom(self._set_end(i))
        if c == "(":
            if self.p.startswith("(?#", i):
                end = self.p.find(")", i)
                return len(self.p) if end < 0 else end + 1
            self.frames.append([0, 0])
            return i + 1
        if c == ")" and len(self.frames) > 1:
            size, _ = self.frames.pop()
            return self._atom(i + 1, size)
        if c == "|":
            frame[1] = 0
            return i + 1
        if (
            c == "{"
            and (match := _REPEAT.match(self.p, i))
            and (match.group(1) or match.group(2) is not None)
        ):
            count = _count(match)
            frame[0] += frame[1] * (count - 1)
            frame[1] *= count
            if frame[0] > MAX_SIZE:
                raise PatternTooLarge(f"the pattern expands past {MAX_SIZE} atoms")
            return match.end()
        if c in "*+?":
            return i + 1
        return self._atom(i + 1)

    def _atom(self, end: int, size: int = 1) -> int:
        frame = self.frames[-1]
        frame[0] += size
        frame[1] = size
        return end

    def _escape_end(self, i: int) -> int:
        end = i + 2
        if self.p[i + 1 : i + 2] in ("p", "P", "x", "N", "u", "U", "g") and (
            braced := _BRACED_ESCAPE.match(self.p, end)
        ):
            return braced.end()
        return end

    def _set_end(self, i: int) -> int:
        """Past the `]` that closes the set opening at `i` (a `]` first in the set is a member)."""
        p, j = self.p, i + 1
        if p[j : j + 1] == "^":
            j += 1
        if p[j : j + 1] == "]":
            j += 1
        while j < len(p) and p[j] != "]":
            j += 2 if p[j] == "\\" else 1
        return j + 1
