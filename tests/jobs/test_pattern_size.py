"""A tenant's pattern is measured before the engine compiles it (issue 40): a counted repeat
expands while compiling, so `a{2000000}` (ten bytes) is refused from its text, as is a pattern
whose nested repeats or sheer length expand past the bound — and what people write still passes."""

from __future__ import annotations

import pytest

from batchgate.jobs.checks import safe_regex
from batchgate.jobs.checks.pattern_size import MAX_REPEAT, MAX_SIZE, PatternTooLarge, check_size


@pytest.mark.parametrize(
    "pattern",
    [
        "a{2000000}",
        "a{4294967294}",
        "a{1,2000000}",
        "a{2000000,}",
        "a{,2000000}",
        "(?:(?:a{100}){100}){100}",  # 1,000,000 atoms from 24 bytes
        "(a{100}){101}",
        "x" * (MAX_SIZE + 1),
        "[a-z]{1000}[a-z]{1000}" * 6,
        r"(?x) (?: a{100} # a ( comment\n ){100}",  # verbose: the flat bound
        r"(?V1)(?:[[a])]a{100}){100}",  # version 1's nested sets: the flat bound
    ],
)
def test_a_pattern_past_the_bound_is_refused_before_compiling(pattern: str) -> None:
    with pytest.raises(PatternTooLarge):
        check_size(pattern)
    info = safe_regex._compiled.cache_info()
    with pytest.raises(PatternTooLarge):
        safe_regex.compile_pattern(pattern)
    assert safe_regex._compiled.cache_info().currsize == info.currsize  # nothing kept


@pytest.mark.parametrize(
    "pattern",
    [
        r"^\d{3}-\d{3}-\d{4}$",
        r"^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,255}\.[A-Za-z]{2,63}$",
        r"echo: (a|aa)+$",
        r"\p{L}{2,10}\N{DIGIT ONE}{3}",  # braces of an escape are not a repeat
        f"a{{{MAX_REPEAT}}}",
        r"[]{}]{5}(?#{9999999}) a{ 5 }",  # a set, a comment and a spaced brace are no repeats
        r"(?i)^(?:yes|no){1,3}$",
    ],
)
def test_what_people_write_passes(pattern: str) -> None:
    check_size(pattern)
    safe_regex.compile_pattern(pattern)


def test_the_refusal_names_the_count() -> None:
    with pytest.raises(PatternTooLarge, match=f"2000000 is over {MAX_REPEAT}"):
        check_size("a{2000000}")
