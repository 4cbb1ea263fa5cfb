"""Output formats. Each module exposes ``render(...) -> str``; a new format is a new file.

:data:`FORMATS` maps a format name to its render function of comparisons (``fuseci run``),
:data:`BENCH_FORMATS` to its render function of timed runs (``fuseci bench``).
"""

from __future__ import annotations

from collections.abc import Callable

from fuseci.bench import BenchResult
from fuseci.compare import Comparison
from fuseci.reporters import bench_console, bench_json, console, github, json, junit, markdown

Renderer = Callable[[list[Comparison]], str]
BenchRenderer = Callable[[list[BenchResult]], str]

FORMATS: dict[str, Renderer] = {
    "console": console.render,
    "json": json.render,
    "junit": junit.render,
    "markdown": markdown.render,
    "github": github.render,
}

BENCH_FORMATS: dict[str, BenchRenderer] = {
    "console": bench_console.render,
    "json": bench_json.render,
}
