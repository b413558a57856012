"""FirstLines: exact duplicate detection over a compact hash table, collisions included."""

from __future__ import annotations

from collections.abc import Callable

from batchgate.jobs.input.first_lines import FirstLines


def table(ids_by_line: dict[int, str], hash_id: Callable[[str], int] = hash) -> tuple[FirstLines, list[int]]:
    """A table whose `same_id` looks the id up by line (the file the caller would re-read) and
    records every line it was asked about."""
    asked: list[int] = []

    def same_id(line_no: int, custom_id: str) -> bool:
        asked.append(line_no)
        return ids_by_line[line_no] == custom_id

    return FirstLines(same_id, hash_id), asked


def test_new_ids_are_recorded_and_a_repeat_names_the_first_line() -> None:
    ids = {line: f"id-{line}" for line in range(1, 5_000)}
    seen, asked = table(ids)
    for line, custom_id in ids.items():
        assert seen.first_line(custom_id, line) is None
    assert len(seen) == len(ids)
    assert asked == []  # distinct ids: no line is re-read
    assert seen.first_line("id-40", 99_999) == 40
    assert asked == [40]


def test_ids_that_share_a_hash_are_told_apart_by_re_reading() -> None:
    ids = {1: "alpha", 2: "beta", 3: "gamma"}
    seen, asked = table(ids, hash_id=lambda _: 42)  # every id collides
    assert seen.first_line("alpha", 1) is None
    assert seen.first_line("beta", 2) is None
    assert seen.first_line("gamma", 3) is None
    assert sorted(asked) == [1, 1, 2]  # beta checked against alpha; gamma against both
    assert seen.first_line("beta", 4) == 2
    assert seen.first_line("delta", 5) is None


def test_only_the_low_32_bits_of_a_hash_are_kept_and_a_match_on_them_is_confirmed() -> None:
    ids = {1: "alpha", 2: "beta"}
    seen, asked = table(ids, hash_id=lambda cid: (1 << 40) * len(cid) + 7)  # same low bits
    assert seen.first_line("alpha", 1) is None
    assert seen.first_line("beta", 2) is None
    assert asked == [1]


def test_the_table_grows_and_keeps_every_id() -> None:
    ids = {line: f"t{line}" for line in range(1, 20_001)}
    seen, _ = table(ids)
    for line, custom_id in ids.items():
        assert seen.first_line(custom_id, line) is None
    assert all(seen.first_line(custom_id, 0) == line for line, custom_id in ids.items())
    assert repr(seen) == "FirstLines(20000 ids in 32768 slots)"  # never more than two-thirds full
