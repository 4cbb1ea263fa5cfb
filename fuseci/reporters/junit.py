"""JUnit XML through junit-xml: one testsuite per suite, one testcase per case and check.

NEW and MISSING checks are skipped testcases (nothing to compare yet), REGRESSED and WRONG are
failures, ERROR and INCOMPARABLE are errors, WARN passes with ``WARNING:`` and its message in
the testcase's ``system-out``. A failure's message gives the baseline, the
current value and the tolerance.
"""

from __future__ import annotations

from junit_xml import TestCase, TestSuite, to_xml_report_string

from fuseci.judge.verdict import Comparison, MetricDelta, Verdict
from fuseci.reporters.text import clean


def _name(k: MetricDelta) -> str:
    parts = [k.case]
    if k.variant:
        parts.append(k.variant)
    parts.append(k.check.value)
    name = ".".join(parts)
    return f"{name}[{k.quantity}]" if k.quantity else name


def _testcase(c: Comparison, line: int, k: MetricDelta) -> TestCase:
    # Every string through clean(): tools that turn JUnit into CI annotations print them raw.
    tc = TestCase(clean(_name(k)), classname=clean(f"{c.suite}.{k.case}"), file=clean(c.suite_path), line=line or None)
    message = clean(k.message)
    match k.verdict:
        case Verdict.WRONG | Verdict.REGRESSED:
            tc.add_failure_info(message=message, failure_type=k.verdict.value)
        case Verdict.ERROR | Verdict.INCOMPARABLE:
            tc.add_error_info(message=message, error_type=k.verdict.value)
        case Verdict.NEW | Verdict.MISSING:
            tc.add_skipped_info(message=message)
        case Verdict.WARN:
            tc.stdout = f"WARNING: {message}"
        case Verdict.PASS | Verdict.IMPROVED:
            tc.stdout = message
    return tc


def render(comparisons: list[Comparison]) -> str:
    """The XML document."""
    suites = [
        TestSuite(
            clean(c.suite),
            [_testcase(c, case.line, k) for case in c.cases for k in case.checks],
            file=clean(c.suite_path),
            stdout="\n".join(clean(f"{case.case}: {n}") for case in c.cases for n in case.notes) or None,
        )
        for c in comparisons
    ]
    return to_xml_report_string(suites, prettyprint=True, encoding="utf-8")
