"""What one HTML page may hold, so that it stays under :data:`PAGE_BYTES` whatever it is given.

A page is built from its most important part down against a :class:`Budget` of bytes per section;
what does not fit is counted ("and 4,980 more cases"). Every string is cut (:func:`cut`) and
weighed escaped, as the template will write it."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import TypeVar

from markupsafe import escape

_T = TypeVar("_T")

#: The most a page may weigh, in bytes (the budget docs/REPORTS.md promises).
PAGE_BYTES = 3_000_000

#: Characters kept of a message, note or description.
TEXT = 600
#: Characters kept of an id, kernel name, path, tolerance or environment value.
NAME = 200

#: Markup written around each piece of text (a cell's tags and attributes), counted generously.
MARKUP = 40


def cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def weight(*texts: str, markup: int = 0) -> int:
    """The bytes ``texts`` take in a page: escaped, UTF-8, each with :data:`MARKUP` around it,
    and ``markup`` more for the element that holds them (a row's or a section's own tags)."""
    return markup + sum(len(str(escape(t)).encode()) + MARKUP for t in texts)


def more(count: int, what: str) -> str:
    """``and 4,980 more cases``; empty for none."""
    return f"and {count:,} more {what}" if count > 0 else ""


class Budget:
    """Bytes left for one section of a page."""

    def __init__(self, size: int) -> None:
        self.left = size

    def take(self, size: int) -> bool:
        """Spend ``size`` bytes if they are left; False (nothing spent) when they are not."""
        if size > self.left:
            return False
        self.left -= size
        return True

    def fit(self, items: Iterable[tuple[_T, int]], most: int) -> list[_T]:
        """The leading ``items`` ((item, size) pairs, taken one at a time: an item is only made
        when the one before it fitted) that fit, at most ``most`` of them."""
        kept: list[_T] = []
        for item, size in islice(items, most):
            if not self.take(size):
                break
            kept.append(item)
        return kept
