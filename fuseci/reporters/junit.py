"""JUnit XML through junit-xml: one testsuite per suite, one testcase per case and check.

NEW and MISSING checks are skipped testcases (nothing to compare yet), REGRESSED and WRONG are
failures, ERROR and INCOMPARABLE are errors, WARN passes with ``WARNING:`` and its message in
the testcase's ``system-out``. A failure's message gives the baseline, the
current value and the tolerance.
"""

from __future__ import annotations

from junit_xml import TestCase, TestSuite, to_xml_report_string

from fuseci.judge.verdict import Comparison, MetricDelta, Verdict


def _name(k: MetricDelta) -> str:
    parts = [k.case]
    if k.variant:
        parts.append(k.variant)
    parts.append(k.check.value)
    name = ".".join(parts)
    return f"{name}[{k.quantity}]" if k.quantity else name


def _testcase(c: Comparison, line: int, k: MetricDelta) -> TestCase:
    tc = TestCase(_name(k), classname=f"{c.suite}.{k.case}", file=c.suite_path, line=line or None)
    match k.verdict:
        case Verdict.WRONG | Verdict.REGRESSED:
            tc.add_failure_info(message=k.message, failure_type=k.verdict.value)
        case Verdict.ERROR | Verdict.INCOMPARABLE:
            tc.add_error_info(message=k.message, error_type=k.verdict.value)
        case Verdict.NEW | Verdict.MISSING:
            tc.add_skipped_info(message=k.message)
        case Verdict.WARN:
            tc.stdout = f"WARNING: {k.message}"
        case Verdict.PASS | Verdict.IMPROVED:
            tc.stdout = k.message
    return tc


def render(comparisons: list[Comparison]) -> str:
    """The XML document."""
    suites = [
        TestSuite(
            c.suite,
            [_testcase(c, case.line, k) for case in c.cases for k in case.checks],
            file=c.suite_path,
            stdout="\n".join(f"{case.case}: {n}" for case in c.cases for n in case.notes) or None,
        )
        for c in comparisons
    ]
    return to_xml_report_string(suites, prettyprint=True, encoding="utf-8")
