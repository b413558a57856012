"""argparse value types shared by the subcommands: each refuses a bad number with argparse's own
one-line error (`argument --lease: must be > 0`)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value
