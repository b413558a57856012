"""FirstLines: exact duplicate detection over a compact hash table, collisions included."""

from __future__ import annotations

from collections.abc import Callable

from batchgate.jobs.io.first_lines import FirstLines


def table(
    ids_by_offset: dict[int, str], hash_id: Callable[[str], int] = hash
) -> tuple[FirstLines, list[int]]:
    """A table whose `same_id` looks the id up by offset (the file the caller would re-read) and
    records every offset it was asked about."""
    asked: list[int] = []

    def same_id(offset: int, line_no: int, custom_id: str) -> bool:
        asked.append(offset)
        return ids_by_offset[offset] == custom_id

    return FirstLines(same_id, hash_id), asked


def test_new_ids_are_recorded_and_a_repeat_names_the_first_line() -> None:
    ids = {offset: f"id-{offset}" for offset in range(0, 50_000, 10)}
    seen, asked = table(ids)
    for line, (offset, custom_id) in enumerate(ids.items(), start=1):
        assert seen.first_line(custom_id, line, offset) is None
    assert len(seen) == len(ids)
    assert asked == []  # distinct ids: no line is re-read
    assert seen.first_line("id-40", 99_999, 500_000) == 5  # offset 40 was line 5
    assert asked == [40]


def test_ids_that_share_a_hash_are_told_apart_by_re_reading() -> None:
    ids = {0: "alpha", 7: "beta", 19: "gamma"}
    seen, asked = table(ids, hash_id=lambda _: 42)  # every id collides
    assert seen.first_line("alpha", 1, 0) is None
    assert seen.first_line("beta", 2, 7) is None
    assert seen.first_line("gamma", 3, 19) is None
    assert sorted(asked) == [0, 0, 7]  # beta checked against alpha; gamma against both
    assert seen.first_line("beta", 4, 30) == 2
    assert seen.first_line("delta", 5, 40) is None


def test_the_table_grows_and_keeps_every_id() -> None:
    ids = {offset: f"t{offset}" for offset in range(20_000)}
    seen, _ = table(ids)
    for offset, custom_id in ids.items():
        assert seen.first_line(custom_id, offset + 1, offset) is None
    assert all(seen.first_line(custom_id, 0, -1) == offset + 1 for offset, custom_id in ids.items())
    assert repr(seen) == "FirstLines(20000 ids in 65536 slots)"  # never more than half full
