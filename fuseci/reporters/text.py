"""Wording shared by the human-readable reporters (console and Markdown), and :func:`clean`, the
one sanitiser of every string fuseci prints or writes into a report."""

from __future__ import annotations

import re
from collections import Counter

from fuseci.config import names
from fuseci.judge.verdict import Comparison, Verdict, exit_code

#: The gains shown in tables, with their column names.
GAIN_COLUMNS: tuple[tuple[str, str], ...] = (
    (names.DRAM_BYTES, "bytes"),
    (names.DURATION, "ncu time"),
    (names.EVENT_TIME, "real time"),
    (names.LAUNCHES, "launches"),
)


#: What :func:`clean` makes visible: C0 controls (newlines, CR, ESC, BEL, NUL, tab...), DEL, C1
#: controls (NEL included), Unicode's line and paragraph separators, and the invisible direction
#: and byte-order marks that can make a line read as something else.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(m: re.Match[str]) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def clean(text: str, keep: str = "") -> str:
    """``text`` with every control character shown as an escape (``\\n``, ``\\x1b``, ``\\u2028``).

    Messages, kernel names, ids and paths come from files fuseci reads (harness records, reports,
    results and run files) and may hold anything. Printed raw, a newline in one would start a line
    of its own, which CI systems read as a command (GitHub Actions' ``::add-mask::`` or
    ``::stop-commands::``), and an ESC would drive the terminal. Every string a reporter or the
    command line prints passes through here once its own line structure is laid out, so that one
    string is always one line. Backslashes are left alone: the escapes are for people to read, not
    to decode. Characters in ``keep`` pass (for a format that escapes them itself).
    """
    if keep:
        return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _visible(m), text)
    return _CONTROL.sub(_visible, text)


def env_line(c: Comparison) -> str:
    """One line naming the GPU, driver, CUDA, CuPy, ncu and its clock and cache control."""
    e = c.env
    return (
        f"GPU {e.get('gpu_name', '?')} (sm_{str(e.get('compute_capability', '?')).replace('.', '')}), "
        f"driver {e.get('driver_version', '?')}, CUDA {e.get('cuda_runtime', '?')}, CuPy {e.get('cupy_version', '?')}, "
        f"ncu {e.get('ncu_version', '?')}, clock-control {e.get('clock_control', '?')}, cache-control {e.get('cache_control', '?')}"
    )


def totals(comparisons: list[Comparison]) -> str:
    """``fuseci: 28 pass, 5 regressed; exit 1``: every verdict counted, and the exit code."""
    counts = Counter(k.verdict for c in comparisons for case in c.cases for k in case.checks)
    summary = ", ".join(f"{counts[v]} {v.value}" for v in reversed(Verdict) if counts[v])
    return f"fuseci: {summary or 'no checks'}; exit {exit_code(comparisons)}"
