"""JUnit XML through junit-xml: a testsuite per suite, a testcase per check, named ``case.variant.check[quantity]``
(``#2`` for a name met twice in a suite). NEW and MISSING are skipped, REGRESSED and WRONG failures, ERROR and
INCOMPARABLE errors, WARN passes with its message in ``system-out``. A failure's body carries the check's numbers, the
variant's measurements and kernels now and at baseline, and a ledger check's ledger; a variant's cause is said whole in
its first finding, the others naming only its kind and that testcase."""

from __future__ import annotations

from junit_xml import TestCase, TestSuite, to_xml_report_string

from fuseci.judge.verdict import FINDINGS, CaseResult, CheckKind, Comparison, MetricDelta, Verdict
from fuseci.reporters.ledger import change_lines, summary_line
from fuseci.reporters.text import cause_line, check_detail, clean, env_line, message, variant_detail

#: Lines of what changed since the baseline's ledger a ledger check's body carries.
_CHANGES = 12


def _name(k: MetricDelta) -> str:
    name = ".".join([k.case, *([k.variant] if k.variant else []), k.check.value])
    return f"{name}[{k.quantity}]" if k.quantity else name


def _ledger_detail(case: CaseResult, variant: str) -> list[str]:
    """A variant's ledger in one line, and what changed since its baseline's (none without one)."""
    v = next((v for v in case.variants if v.variant == variant and v.ledger is not None), None)
    if v is None or v.ledger is None:
        return []
    lines = [f"ledger: {summary_line(v.ledger)}"]
    if v.baseline_ledger is not None:
        changes, left = change_lines(v.ledger_changes, _CHANGES)
        lines += ["since the baseline's ledger:", *(f"  {line}" for line in changes)]
        lines += [f"  and {left:,} more changes"] if left else []
    return lines


def _body(c: Comparison, case: CaseResult, k: MetricDelta, ledger: list[str], cause: str = "") -> str:
    said = f"{k.verdict.value.upper()}: {message(k)}"
    lines = [said, cause, check_detail(k), *ledger, *variant_detail(case, k.variant)]
    lines.append(f"suite {c.suite_path}" + (f", line {case.line}" if case.line else ""))
    if c.env:
        lines.append(env_line(c))
    if c.baseline_path:
        lines.append(f"baseline {c.baseline_path}" if c.has_baseline else f"no baseline at {c.baseline_path}")
    return "\n".join(clean(line) for line in lines if line)  # no line for an empty cause or numbers


def _testcase(c: Comparison, case: CaseResult, k: MetricDelta, name: str, ledger: list[str], cause: str) -> TestCase:
    # Every string through clean(): tools that turn JUnit into CI annotations print them raw.
    tc = TestCase(name, classname=clean(f"{c.suite}.{k.case}"), file=clean(c.suite_path), line=case.line or None)
    said = clean(message(k))
    match k.verdict:
        case Verdict.WRONG | Verdict.REGRESSED:
            tc.add_failure_info(message=said, output=_body(c, case, k, ledger, cause), failure_type=k.verdict.value)
        case Verdict.ERROR | Verdict.INCOMPARABLE:
            tc.add_error_info(message=said, output=_body(c, case, k, ledger), error_type=k.verdict.value)
        case Verdict.NEW | Verdict.MISSING:
            tc.add_skipped_info(message=said)
        case Verdict.WARN:
            tc.stdout = f"WARNING: {_body(c, case, k, ledger, cause)}"
        case Verdict.IMPROVED:
            tc.stdout = "\n".join([said, *([clean(cause)] if cause else [])])
        case Verdict.PASS:
            tc.stdout = said
    return tc


def _causes(case: CaseResult, names: dict[int, str]) -> dict[int, str]:
    """The cause line of each check (by its index) with a finding of a variant that has a cause:
    the whole cause for the variant's first, its kind and where it is said for the others."""
    why = {v.variant: v.cause for v in case.variants if v.cause is not None}
    first: dict[str, str] = {}
    out = {}
    for i, k in enumerate(case.checks):
        cause = why.get(k.variant) if k.variant else None
        if cause is None or k.verdict not in FINDINGS:
            continue
        if k.variant in first:
            out[i] = f"cause: {cause.kind.value} (said in {first[k.variant]})"
        else:
            first[k.variant] = names[i]
            out[i] = cause_line(cause)
    return out


def _testcases(c: Comparison) -> list[TestCase]:
    seen: dict[str, int] = {}
    out = []
    for case in c.cases:
        names: dict[int, str] = {}
        for i, k in enumerate(case.checks):
            name = clean(_name(k))
            seen[name] = seen.get(name, 0) + 1
            names[i] = name if seen[name] == 1 else f"{name}#{seen[name]}"
        causes = _causes(case, names)
        for i, k in enumerate(case.checks):
            ledger = _ledger_detail(case, k.variant) if k.check is CheckKind.LEDGER else []
            out.append(_testcase(c, case, k, names[i], ledger, causes.get(i, "")))
    return out


def render(comparisons: list[Comparison]) -> str:
    """The XML document."""
    suites = [
        TestSuite(
            clean(c.suite),
            _testcases(c),
            file=clean(c.suite_path),
            stdout="\n".join(
                [*(clean(n) for n in c.notes), *(clean(f"{case.case}: {n}") for case in c.cases for n in case.notes)]
            )
            or None,
        )
        for c in comparisons
    ]
    return to_xml_report_string(suites, prettyprint=True, encoding="utf-8")
