"""Suites dealt out to shards (and GPUs), and the results of several runs merged into one."""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from fuseci.config.model import Suite
from fuseci.config.names import gpu_slug, id_key
from fuseci.errors import ReportError, UsageError
from fuseci.files.outputs import same_file
from fuseci.judge.verdict import Comparison
from fuseci.store.results import read_results

#: Most shards ``--shard K/N`` may name: far more than any CI matrix, few enough to check at once.
MAX_SHARDS = 10_000

_SHARD = re.compile(r"\A([0-9]{1,6})/([0-9]{1,6})\Z")


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` → (2, 4).

    Raises:
        UsageError: not ``K/N`` with 1 <= K <= N <= :data:`MAX_SHARDS`.
    """
    m = _SHARD.fullmatch(text)
    if m is None:
        raise UsageError(
            f"--shard {text[:40]!r}: write K/N with whole numbers, e.g. 2/4 (shard K of N, counting from 1; "
            f"N at most {MAX_SHARDS})"
        )
    k, n = int(m.group(1)), int(m.group(2))
    if n > MAX_SHARDS:
        raise UsageError(f"--shard {text!r}: N is at most {MAX_SHARDS}; use fewer shards")
    if not 1 <= k <= n:
        raise UsageError(f"--shard {text!r}: K must be between 1 and N")
    return k, n


def shard(suites: list[Suite], k: int, n: int) -> list[Suite]:
    """The suites shard ``k`` of ``n`` runs: dealt out deterministically, the largest first to the lightest shard."""
    heap = [(0, i) for i in range(min(n, len(suites)))]  # (load, shard index): already a heap
    owner: dict[str, int] = {}
    for suite in sorted(suites, key=lambda s: (-len(s.cases), s.name)):
        load, lightest = heapq.heappop(heap)
        owner[suite.name] = lightest
        heapq.heappush(heap, (load + len(suite.cases), lightest))
    return [s for s in suites if owner[s.name] == k - 1]


def _base_name(suite: str) -> str:
    """A suite's id without the ``@gpu-slug`` an earlier merge gave it."""
    return suite.split("@", 1)[0]


def _card(c: Comparison) -> str:
    return gpu_slug(str(c.env.get("gpu_name", "unknown")))


def merge(comparisons: list[Comparison]) -> list[Comparison]:
    """Comparisons of several runs as one list; a suite met more than once (one per GPU model) is
    renamed ``suite@gpu-slug`` (``suite@unknown-gpu``, ``-2``... for those that know no card)."""
    counts = Counter(_base_name(c.suite) for c in comparisons)
    used: set[str] = set()
    out: list[Comparison] = []
    for c in comparisons:
        base = _base_name(c.suite)
        name = c.suite if counts[base] == 1 else f"{base}@{_card(c) if c.env else 'unknown-gpu'}"
        n, unique = 1, name
        while unique in used:
            n += 1
            unique = f"{name}-{n}"
        used.add(unique)
        out.append(c if unique == c.suite else replace(c, suite=unique))
    return out


def merge_results(paths: Sequence[Path]) -> list[Comparison]:
    """Read results files (``fuseci run --json``) and merge them (:func:`merge`); two results of one
    suite on one card are refused (which one counts is the user's decision).

    Raises:
        ReportError: a file unreadable, malformed or named twice; a suite's card held twice; ids differing in case.
    """
    for i, path in enumerate(paths):
        for earlier in paths[:i]:
            if same_file(path, earlier):
                raise ReportError(f"{path}: named twice (also as {earlier}); pass each results file once")
    seen: dict[tuple[str, str], Path] = {}
    spelled: dict[str, tuple[str, Path]] = {}
    comparisons: list[Comparison] = []
    for path in paths:
        for c in read_results(path):
            name = _base_name(c.suite)
            first, where = spelled.setdefault(id_key(name), (name, path))
            if first != name:
                raise ReportError(
                    f"{path}: suite {name!r} differs from {first!r} ({_where(where, path)}) only in letter case; "
                    "suite ids are compared ignoring case, as macOS and Windows compare the file names they give: "
                    "rename one"
                )
            key = (id_key(name), _card(c))
            if c.env and key in seen:
                raise ReportError(
                    f"{path}: suite {name!r} on {key[1]} is also {_where(seen[key], path)}: two results of one suite "
                    "on one card cannot be merged (which should count?); pass one results file per suite and card, "
                    "the run you want judged"
                )
            seen.setdefault(key, path)
            comparisons.append(c)
    return merge(comparisons)


def _where(earlier: Path, path: Path) -> str:
    return "earlier in the same file" if earlier == path else f"in {earlier}"
