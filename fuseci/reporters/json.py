"""Machine-readable results (every number, every check, the environment) in :mod:`fuseci.store.results`' format,
which also reads it back (``fuseci merge``)."""

from __future__ import annotations

from fuseci.judge.verdict import Comparison
from fuseci.store import results


def render(comparisons: list[Comparison]) -> str:
    """The results document (sorted keys, trailing newline)."""
    return results.dumps(comparisons)
