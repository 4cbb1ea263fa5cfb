"""Output formats. Each module exposes ``render(comparisons) -> str``; a new format is a new file.

:data:`FORMATS` maps a format name to its render function for the CLI.
"""

from __future__ import annotations

from collections.abc import Callable

from fuseci.compare import Comparison
from fuseci.reporters import console, json, junit

Renderer = Callable[[list[Comparison]], str]

FORMATS: dict[str, Renderer] = {
    "console": console.render,
    "json": json.render,
    "junit": junit.render,
}
