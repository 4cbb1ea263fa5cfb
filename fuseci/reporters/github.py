"""GitHub Actions workflow commands that annotate the suite file: one per variant that did not pass
(:func:`~fuseci.judge.verdict.subjects`), of the kind of its worst verdict, at the case's line. GitHub silently drops
annotations past :data:`ANNOTATIONS_PER_STEP` of a kind per step, so at most that many are written, worst first, the
last notice counting the rest."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from fuseci.judge.verdict import Comparison, MetricDelta, Subject, Verdict, subjects
from fuseci.reporters.text import clean, count, message

#: Annotations of one kind (error, warning, notice) GitHub shows per step.
ANNOTATIONS_PER_STEP = 10

_KINDS = ("error", "warning", "notice")
#: One notice is kept for the line about what was left out.
_LIMITS = {"error": ANNOTATIONS_PER_STEP, "warning": ANNOTATIONS_PER_STEP, "notice": ANNOTATIONS_PER_STEP - 1}


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF percent-encoded (line breaks in the annotation), every other
    control character made visible (:func:`~fuseci.reporters.text.clean`): nothing can end the command."""
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


def _command(kind: str, c: Comparison, s: Subject, shown: list[MetricDelta]) -> str:
    # A suite that could not run has no env and a stand-in case: the suite alone is the title.
    where = [c.suite] if not c.env else [c.suite, s.case, *([s.variant] if s.variant else [])]
    props = [f"file={escape_property(c.suite_path)}"]
    if s.line:
        props.append(f"line={s.line}")
    props.append(f"title={escape_property('fuseci ' + '/'.join(where))}")
    lines = [f"{k.verdict.value.upper()}: {message(k)}" for k in shown]  # a ledger check cut as the console cuts it
    if len(shown) > 1:  # one annotation per variant: how many of its checks of each verdict, then each
        counts = Counter(k.verdict for k in shown)  # shown is sorted worst first
        lines.insert(0, "; ".join(f"{v.value.upper()}: {count(n, 'check')}" for v, n in counts.items()))
    return f"::{kind} {','.join(props)}::{escape_data(chr(10).join(lines))}"


def render(comparisons: list[Comparison], failures: Sequence[str] = ()) -> str:
    """The workflow commands, one per line (empty when every check passed and nothing failed); each of ``failures``
    (a report or the step summary fuseci could not write) an error annotation first, counted among those shown."""
    found = [(s, c) for c in comparisons for s in subjects([c])]
    found.sort(key=lambda item: item[0].verdict.rank)  # stable: suite order within a verdict
    lines: dict[str, list[str]] = {kind: [] for kind in _KINDS}
    lines["error"] = [f"::error title=fuseci::{escape_data(message)}" for message in failures[: _LIMITS["error"]]]
    left_out = dict.fromkeys(_KINDS, 0)
    for s, c in found:
        kind = _kind(s.verdict)
        if kind is None:
            continue
        if len(lines[kind]) < _LIMITS[kind]:
            shown = sorted((k for k in s.checks if k.verdict is not Verdict.PASS), key=lambda k: k.verdict.rank)
            lines[kind].append(_command(kind, c, s, shown))
        else:
            left_out[kind] += 1
    out = [line for kind in _KINDS for line in lines[kind]]
    if any(left_out.values()):
        counts = [count(n, kind) for kind, n in left_out.items() if n]
        counted = counts[0] if len(counts) == 1 else f"{', '.join(counts[:-1])} and {counts[-1]}"
        out.append(
            "::notice::"
            + escape_data(
                f"fuseci: {counted} not annotated (GitHub shows {ANNOTATIONS_PER_STEP} of each kind "
                "per step); every check is in this step's log and in the JUnit report (fuseci run --junit FILE)"
            )
        )
    return "".join(line + "\n" for line in out)
