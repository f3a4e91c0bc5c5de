"""Argument types shared by the `keras-vit` commands: argparse parsers
that refuse a value with argparse's own message (`usage: ... error:
argument --batch-size: expected ...`), before any command runs."""

import argparse
import math


def batch_size(text):
    """A positive integer, or `None` for "dynamic" (a dynamic batch)."""
    if text == "dynamic":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer or 'dynamic', got {text!r}"
        )
    return value


def _integer(text, least):
    """An integer of at least `least` (argparse's int takes "-1")."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        kind = "a positive integer" if least == 1 else f"an integer >= {least}"
        raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}")
    return value


def positive_int(text):
    """An integer >= 1."""
    return _integer(text, 1)


def non_negative_int(text):
    """An integer >= 0."""
    return _integer(text, 0)


def fraction(text):
    """A finite number in [0, 1] (argparse's float takes 'nan' and 'inf')."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(
            f"expected a number in [0, 1], got {text!r}"
        )
    return value
