"""GitHub Actions workflow commands that annotate the suite file, one line per check.

``WRONG``, ``REGRESSED``, ``ERROR`` and ``INCOMPARABLE`` checks are ``::error``, ``WARN``, ``NEW``
and ``MISSING`` are ``::warning``, ``IMPROVED`` is ``::notice`` (the gain rose beyond its tolerance:
update the baseline to keep it), ``PASS`` is nothing. Each annotation points at the case's line
in the suite file, titled ``fuseci <suite>/<case>/<variant>``.

GitHub shows at most :data:`ANNOTATIONS_PER_STEP` annotations of each kind per step (and 50 per
job) and drops the rest without a word. So at most that many errors and warnings are written,
worst first, and one notice fewer: the last notice says how many were left out and where every
check is (the step log, the JUnit report).
"""

from __future__ import annotations

from collections.abc import Sequence

from fuseci.judge.verdict import Comparison, MetricDelta, Verdict
from fuseci.reporters.text import clean

#: Annotations of one kind (error, warning, notice) GitHub shows per step.
ANNOTATIONS_PER_STEP = 10

_KINDS = ("error", "warning", "notice")
#: One notice is kept for the line about what was left out.
_LIMITS = {"error": ANNOTATIONS_PER_STEP, "warning": ANNOTATIONS_PER_STEP, "notice": ANNOTATIONS_PER_STEP - 1}


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF percent-encoded (GitHub shows them as line
    breaks inside the annotation), every other control character made visible
    (:func:`~fuseci.reporters.text.clean`): nothing can end the command and start another."""
    return clean(text, keep="\r\n").replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as :func:`escape_data`, and ``:`` and ``,`` too."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _kind(verdict: Verdict) -> str | None:
    match verdict:
        case Verdict.WRONG | Verdict.REGRESSED | Verdict.ERROR | Verdict.INCOMPARABLE:
            return "error"
        case Verdict.WARN | Verdict.NEW | Verdict.MISSING:
            return "warning"
        case Verdict.IMPROVED:
            return "notice"
        case Verdict.PASS:
            return None


def _command(kind: str, c: Comparison, line: int, k: MetricDelta) -> str:
    # A suite that could not run has no env and a stand-in case: the suite alone is the title.
    where = [c.suite] if not c.env else [c.suite, k.case, *([k.variant] if k.variant else [])]
    props = [f"file={escape_property(c.suite_path)}"]
    if line:
        props.append(f"line={line}")
    props.append(f"title={escape_property('fuseci ' + '/'.join(where))}")
    return f"::{kind} {','.join(props)}::{escape_data(f'{k.verdict.value.upper()}: {k.message}')}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def render(comparisons: list[Comparison], failures: Sequence[str] = ()) -> str:
    """The workflow commands, one per line (empty when every check passed and nothing failed).

    Args:
        comparisons: The suites judged.
        failures: What fuseci itself could not do (a report or the step summary that could not
            be written), each an error annotation before every other, counted among the errors
            GitHub shows.
    """
    found = [(k, c, case.line) for c in comparisons for case in c.cases for k in case.checks]
    found.sort(key=lambda item: item[0].verdict.rank)  # stable: suite order within a verdict
    lines: dict[str, list[str]] = {kind: [] for kind in _KINDS}
    lines["error"] = [f"::error title=fuseci::{escape_data(message)}" for message in failures[: _LIMITS["error"]]]
    left_out = dict.fromkeys(_KINDS, 0)
    for k, c, line in found:
        kind = _kind(k.verdict)
        if kind is None:
            continue
        if len(lines[kind]) < _LIMITS[kind]:
            lines[kind].append(_command(kind, c, line, k))
        else:
            left_out[kind] += 1
    out = [line for kind in _KINDS for line in lines[kind]]
    if any(left_out.values()):
        counts = [_plural(n, kind) for kind, n in left_out.items() if n]
        counted = counts[0] if len(counts) == 1 else f"{', '.join(counts[:-1])} and {counts[-1]}"
        out.append(
            "::notice::"
            + escape_data(
                f"fuseci: {counted} not annotated (GitHub shows {ANNOTATIONS_PER_STEP} of each kind "
                "per step); every check is in this step's log and in the JUnit report (fuseci run --junit FILE)"
            )
        )
    return "".join(line + "\n" for line in out)
