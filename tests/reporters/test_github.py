"""GitHub Actions annotations: which checks, in which order, how many, escaped how.
Regenerate the pinned document after an intended change with
``FUSECI_UPDATE_EXPECTED=1 pytest tests/reporters`` and review the diff."""

from helpers import CLEAN_REPORT, REGRESSED_REPORT, pinned, recorded_comparison

from fuseci.config import names
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, Verdict, failed
from fuseci.reporters import FORMATS, github

ENV = {"gpu_name": "NVIDIA H200"}


def _check(case: str, verdict: Verdict, message: str = "m", variant: str = "fused") -> MetricDelta:
    return MetricDelta(case, variant, CheckKind.GAIN, names.DRAM_BYTES, verdict, message)


def _synthetic(checks: list[MetricDelta], suite_path: str = "suites/s.yaml", line: int = 12) -> Comparison:
    cases = tuple(CaseResult(k.case, line, "", (k,), ()) for k in checks)
    return Comparison("s", suite_path, ENV, "baselines/nvidia-h200/s.json", True, (), cases)


def _kinds(text: str) -> list[str]:
    return [line.split(" ", 1)[0].split("::")[1] for line in text.splitlines()]


def test_regressed_fixture_is_pinned(in_root) -> None:
    pinned("elementwise-regressed.github.txt", github.render([recorded_comparison(REGRESSED_REPORT)]))


def test_clean_run_annotates_nothing(in_root) -> None:
    assert github.render([recorded_comparison(CLEAN_REPORT)]) == ""


def test_verdicts_map_to_kinds_and_pass_to_nothing() -> None:
    checks = [_check(f"c{v.name}", v) for v in Verdict]
    lines = github.render([_synthetic(checks)]).splitlines()
    assert lines == [
        "::error file=suites/s.yaml,line=12,title=fuseci s/cWRONG/fused::WRONG: m",
        "::error file=suites/s.yaml,line=12,title=fuseci s/cREGRESSED/fused::REGRESSED: m",
        "::error file=suites/s.yaml,line=12,title=fuseci s/cERROR/fused::ERROR: m",
        "::error file=suites/s.yaml,line=12,title=fuseci s/cINCOMPARABLE/fused::INCOMPARABLE: m",
        "::warning file=suites/s.yaml,line=12,title=fuseci s/cWARN/fused::WARN: m",
        "::warning file=suites/s.yaml,line=12,title=fuseci s/cMISSING/fused::MISSING: m",
        "::warning file=suites/s.yaml,line=12,title=fuseci s/cNEW/fused::NEW: m",
        "::notice file=suites/s.yaml,line=12,title=fuseci s/cIMPROVED/fused::IMPROVED: m",
    ]
    assert github.render([_synthetic([_check("c", Verdict.PASS)])]) == ""


def test_worst_first_across_suites() -> None:
    first = _synthetic([_check("a", Verdict.INCOMPARABLE), _check("b", Verdict.REGRESSED)])
    second = _synthetic([_check("c", Verdict.ERROR), _check("d", Verdict.WRONG), _check("e", Verdict.REGRESSED)])
    titles = [line.split("title=fuseci s/")[1].split("/")[0] for line in github.render([first, second]).splitlines()]
    assert titles == ["d", "b", "e", "c", "a"]


def test_at_most_ten_errors_then_a_notice() -> None:
    text = github.render([_synthetic([_check(f"c{i:02d}", Verdict.REGRESSED) for i in range(25)])])
    lines = text.splitlines()
    assert _kinds(text) == ["error"] * github.ANNOTATIONS_PER_STEP + ["notice"]
    assert [line.split("title=fuseci s/")[1][:3] for line in lines[:-1]] == [f"c{i:02d}" for i in range(10)]
    assert lines[-1] == (
        "::notice::fuseci: 15 errors not annotated (GitHub shows 10 of each kind per step); every check is in "
        "this step's log and in the JUnit report (fuseci run --junit FILE)"
    )


def test_the_least_severe_are_left_out() -> None:
    checks = [_check(f"i{i}", Verdict.INCOMPARABLE) for i in range(5)] + [
        _check(f"r{i}", Verdict.REGRESSED) for i in range(8)
    ]
    checks += [_check(f"n{i}", Verdict.NEW) for i in range(12)] + [_check(f"w{i}", Verdict.WRONG) for i in range(3)]
    text = github.render([_synthetic(checks)])
    assert _kinds(text) == ["error"] * 10 + ["warning"] * 10 + ["notice"]
    errors = [line for line in text.splitlines() if line.startswith("::error")]
    assert sum("WRONG:" in e for e in errors) == 3 and sum("REGRESSED:" in e for e in errors) == 7
    assert text.splitlines()[-1].startswith("::notice::fuseci: 6 errors and 2 warnings not annotated")


def test_notices_keep_a_slot_for_the_left_out_line() -> None:
    text = github.render([_synthetic([_check(f"c{i}", Verdict.IMPROVED) for i in range(12)])])
    assert _kinds(text) == ["notice"] * 10
    assert text.splitlines()[-1].startswith("::notice::fuseci: 3 notices not annotated")


def test_properties_and_message_are_escaped() -> None:
    comp = _synthetic([_check("c", Verdict.REGRESSED, "fell 40%\r\nsee: a, b")], suite_path="dir,x/odd:100%.yaml")
    assert github.render([comp]) == (
        "::error file=dir%2Cx/odd%3A100%25.yaml,line=12,title=fuseci s/c/fused::REGRESSED: fell 40%25%0D%0Asee: a, b\n"
    )
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert github.escape_data("a:b,c%\r") == "a:b,c%25%0D"


def test_line_is_omitted_when_unknown_and_failed_suites_are_titled_by_suite(elementwise) -> None:
    missing = _synthetic([_check("gone", Verdict.MISSING, "in the baseline only", variant="")], line=0)
    assert (
        github.render([missing]) == "::warning file=suites/s.yaml,title=fuseci s/gone::MISSING: in the baseline only\n"
    )
    assert github.render([failed(elementwise, "ncu not found")]) == (
        f"::error file={github.escape_property(str(elementwise.path))},title=fuseci elementwise::ERROR: ncu not found\n"
    )


def test_both_formats_are_registered(elementwise) -> None:
    from fuseci.reporters import markdown

    comparisons = [failed(elementwise, "ncu not found")]
    assert FORMATS["github"](comparisons) == github.render(comparisons)
    assert FORMATS["markdown"](comparisons) == markdown.render(comparisons)
