"""The Markdown step summary, pinned by whole expected documents from the recorded reports.
Regenerate after an intended change with ``FUSECI_UPDATE_EXPECTED=1 pytest tests/reporters``
and review the diff."""

import html
import re
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, REGRESSED_REPORT, pinned, recorded_comparison
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseci.config import names
from fuseci.judge.verdict import (
    CaseResult,
    CheckKind,
    Comparison,
    EnvDifference,
    MetricDelta,
    VariantMeasurement,
    Verdict,
    failed,
)
from fuseci.reporters import markdown

ENV = {
    "gpu_name": "NVIDIA H200",
    "compute_capability": "9.0",
    "driver_version": "580.159.04",
    "cuda_runtime": "13.2",
    "cupy_version": "14.2.0",
    "ncu_version": "2025.3.1.0",
    "clock_control": "none",
    "cache_control": "all",
}
GAINS = {names.DRAM_BYTES: 2.3251, names.DURATION: 5.07, names.EVENT_TIME: 4.96, names.LAUNCHES: 3.0}


def _check(case: str, variant: str, verdict: Verdict, message: str = "gain moved") -> MetricDelta:
    return MetricDelta(case, variant, CheckKind.GAIN, names.DRAM_BYTES, verdict, message)


def _synthetic(cases: list[CaseResult], **kw) -> Comparison:
    fields = {
        "suite": "synthetic",
        "suite_path": "suites/synthetic.yaml",
        "env": ENV,
        "baseline_path": "baselines/nvidia-h200/synthetic.json",
        "has_baseline": True,
        "env_differences": (),
        "cases": tuple(cases),
    }
    return Comparison(**{**fields, **kw})


def _case(case: str, checks: list[MetricDelta], variants: tuple[str, ...] = ("unfused", "fused")) -> CaseResult:
    measured = tuple(VariantMeasurement(v, {}, GAINS if v != "unfused" else {}, ()) for v in variants)
    return CaseResult(case, 7, "", tuple(checks), measured)


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| case |")]


@pytest.mark.parametrize(
    ("report", "name"), [(CLEAN_REPORT, "elementwise"), (REGRESSED_REPORT, "elementwise-regressed")]
)
def test_markdown_document_is_pinned(report: Path, name: str, in_root) -> None:
    pinned(f"{name}.summary.md", markdown.render([recorded_comparison(report)]))


def test_regressed_summary_says_what_fell(in_root) -> None:
    text = markdown.render([recorded_comparison(REGRESSED_REPORT)])
    assert text.startswith(
        "**fuseci: 1 variant regressed: 11 checks; 9 variants pass: 72 checks; exit 1**\n\n## ❌ elementwise: **REGRESSED**\n"
    )
    assert "| scale_relu_add | fused | 1.40x | 2.95x | 2.86x | 1.50x | ❌ REGRESSED |" in text
    assert "| bias_gelu | fused | 12.23x | 23.40x | 23.22x | 10.00x | ✅ PASS |" in text
    assert "Baseline `baselines/nvidia-h200/elementwise.json`" in text
    assert "fell from 2.32x to 1.4x (-39.5%); tolerance ±1%" in text
    lines = text.splitlines()
    (head,) = [i for i, line in enumerate(lines) if line.startswith("- ❌ **REGRESSED** scale_relu_add/fused")]
    # One block: the split, then what it cost, the bytes its other kernels asked of memory among it.
    assert lines[head] == "- ❌ **REGRESSED** scale_relu_add/fused"
    assert [line.startswith("  - ") for line in lines[head + 1 : head + 7]] == [True] * 5 + [False]
    # Its cause first, once for the variant; the checks' lines no longer repeat how the kernels changed.
    assert lines[head + 1].startswith("  - *cause: undetermined: its kernels changed (split: ")
    assert not any("its kernels changed" in line for line in lines[head + 2 : head + 6])
    # The fewest lines that say what moved, then where the rest are.
    assert lines[head + 5] == "  - *8 more failing checks: -v (or the HTML report)*"
    record = "fuseci update-baselines suites/elementwise.yaml --from-report tests/data/reports/elementwise-regressed.ncu-rep.xz"
    assert "the fusion split" in lines[head + 2] and f"record it with `{record}`" in lines[head + 2]
    assert "- note: DRAM writes read up to 9% low in 5 cases" in text  # one line, not one per case
    assert text.endswith("**fuseci: 1 variant regressed: 11 checks; 9 variants pass: 72 checks; exit 1**\n")


def test_suite_that_could_not_run_shows_its_error(elementwise) -> None:
    text = markdown.render([failed(elementwise, "ncu (Nsight Compute) not found\nput ncu on PATH")])
    assert "## ⚠️ elementwise: **ERROR**" in text
    assert "ncu (Nsight Compute) not found\\\\nput ncu on PATH" in text  # one line: the newline shown
    assert "| case |" not in text
    assert text.endswith("**fuseci: 1 suite in error: 1 check; exit 3**\n")


def test_row_verdict_is_the_worst_of_the_variant_unfused_and_case_checks() -> None:
    comp = _synthetic([
        _case("a", [_check("a", "fused", Verdict.PASS), _check("a", "fused2", Verdict.IMPROVED)], ("unfused", "fused", "fused2")),
        _case("b", [_check("b", "fused", Verdict.PASS), MetricDelta("b", "unfused", CheckKind.CORRECTNESS, "", Verdict.WRONG, "wrong")]),
        CaseResult("gone", 0, "", (MetricDelta("gone", "", CheckKind.CASE, "", Verdict.MISSING, "not in the suite"),), ()),
        CaseResult("broken", 9, "", (MetricDelta("broken", "fused", CheckKind.CORRECTNESS, "", Verdict.WRONG, "wrong"),), ()),
    ])  # fmt: skip
    assert _table_rows(markdown.render([comp])) == [  # the worst first, the passing one collapsed last
        "| b | fused | 2.33x | 5.07x | 4.96x | 3.00x | ❌ WRONG |",
        "| broken | fused | - | - | - | - | ❌ WRONG |",
        "| gone | - | - | - | - | - | ℹ️ MISSING |",
        "| a | fused2 | 2.33x | 5.07x | 4.96x | 3.00x | ✅ IMPROVED |",
        "| a | fused | 2.33x | 5.07x | 4.96x | 3.00x | ✅ PASS |",
    ]


def test_no_baseline_and_environment_differences() -> None:
    diffs = (
        EnvDifference("cupy_version", "14.1.0", "14.2.0", accepted=False),
        EnvDifference("driver_version", "570.1", "580.159.04", accepted=True),
    )
    text = markdown.render([_synthetic([], has_baseline=False, env_differences=diffs)])
    assert (
        "No baseline at `baselines/nvidia-h200/synthetic.json` yet, so 0 checks have nothing to compare with: "
        "record one with `fuseci update-baselines suites/synthetic.yaml`" in text
    )
    assert "- cupy\\_version: baseline '14.1.0', now '14.2.0' (**not compared**)" not in text  # intraword _ stays
    assert "- cupy_version: baseline '14.1.0', now '14.2.0' (**not compared**)" in text
    assert "- driver_version: baseline '570.1', now '580.159.04' (accepted)" in text


def test_untrusted_text_cannot_break_the_table_or_inject_html() -> None:
    evil = "a|b <script>alert(1)</script> `x` *y* [z](http://e) 100%\nsecond line\r\nthird"
    comp = _synthetic([_case("c|1", [_check("c|1", "fused", Verdict.REGRESSED, evil)])], suite="s<b>")
    text = markdown.render([comp])
    assert "<script>" not in text and "<b>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    (row,) = _table_rows(text)
    assert len(re.findall(r"(?<!\\)\|", row)) == 8  # 7 cells, the id's own | escaped
    assert row.startswith("| c\\|1 | fused |")
    (bullet,) = [line for line in text.splitlines() if line.startswith("- ")]
    assert bullet == "- ❌ **REGRESSED** c\\|1/fused"
    (message,) = [line for line in text.splitlines() if line.startswith("  - ")]
    assert message == (  # what it quotes in backticks is a code span, where nothing is markup
        "  - a\\|b &lt;script&gt;alert(1)&lt;/script&gt; `x` \\*y\\* \\[z\\](http&#8203;://e) 100%\\\\nsecond line\\\\r\\\\nthird"
    )


def test_code_spans_take_any_path() -> None:
    assert markdown.code("a`b") == "``a`b``"
    assert markdown.code("`a") == "`` `a ``"
    assert markdown.code("x\ny") == "`x\\ny`"


def _big(n: int) -> Comparison:
    checks = [
        _check(f"case{i:05d}", "fused", Verdict.REGRESSED, "DRAM bytes gain fell from 2.32x to 1.4x " * 3)
        for i in range(n)
    ]
    return _synthetic([_case(k.case, [k]) for k in checks])


@pytest.mark.parametrize("limit", [markdown.STEP_SUMMARY_LIMIT, 200_000, 20_000, 2_000, 300, 40, 0])
def test_a_document_over_the_limit_is_cut_to_it(limit: int) -> None:
    text = markdown.render([_big(8000)], limit=limit)
    assert len(text.encode("utf-8")) <= limit
    if limit >= 300:
        assert "Truncated to the" in text and "The JSON report (`fuseci run --json FILE`) has everything." in text
        assert "**fuseci: 8000 variants regressed: 8000 checks; exit 1**" in text


def test_check_messages_go_before_table_rows_and_from_the_end() -> None:
    comp = _big(8000)
    full = markdown.render([comp], limit=10**9)
    assert len(full.encode()) > markdown.STEP_SUMMARY_LIMIT  # the limit is what cuts here
    text = markdown.render([comp], limit=markdown.STEP_SUMMARY_LIMIT)
    assert len(text.encode()) <= markdown.STEP_SUMMARY_LIMIT
    rows, bullets = _table_rows(text), [line for line in text.splitlines() if line.startswith(("- ", "  - "))]
    assert len(rows) == 8000 and 0 < len(bullets) < 16000  # a heading and a message per case
    heads = [line for line in bullets if line.startswith("- ")]
    assert heads == [f"- ❌ **REGRESSED** case{i:05d}/fused" for i in range(len(heads))]  # kept from the start
    assert text.splitlines()[-1].startswith(
        f"*Truncated to the 1048576-byte limit: left out {16000 - len(bullets)} lines of check messages, the least "
        "severe first."
    )
    tight = markdown.render([comp], limit=20_000)
    rows = _table_rows(tight)
    assert 0 < len(rows) < 8000 and rows[-1].startswith(f"| case{len(rows) - 1:05d} |")
    assert not any(line.startswith(("- ", "  - ")) for line in tight.splitlines())
    assert f"left out 16000 lines of check messages and {8000 - len(rows)} other table rows," in tight


def test_a_document_within_the_limit_is_untouched(in_root) -> None:
    comp = recorded_comparison(REGRESSED_REPORT)
    text = markdown.render([comp])
    assert markdown.render([comp], limit=len(text.encode())) == text
    assert "Truncated" not in text


# --- a pull-request comment: bounded, worst first, the verdict always in it ------------------------


def _passing(n: int, suite: str = "big") -> Comparison:
    cases = [
        _case(f"case{i:05d}", [_check(f"case{i:05d}", "fused", Verdict.PASS, "within tolerance")]) for i in range(n)
    ]
    return _synthetic(cases, suite=suite, suite_path=f"suites/{suite}.yaml")


def _regressed(suite: str = "small") -> Comparison:
    checks = [_check("split", "fused", Verdict.REGRESSED, "fused launches 2 kernels, the baseline 1")]
    return _synthetic([_case("split", checks)], suite=suite, suite_path=f"suites/{suite}.yaml")


def _workflow_cut(summary: str, limit: int = 60_000) -> str:
    """What the pull-request comment job keeps of a summary (.github/workflows/gpu.yml)."""
    if len(summary) <= limit:
        return summary
    return (
        summary[: summary.rfind("\n", 0, limit)]
        + "\n\n*Truncated: the job summary and the HTML report have everything.*"
    )


def test_a_large_passing_suite_cannot_push_a_regression_out_of_the_comment() -> None:
    comparisons = [_passing(5000), _regressed()]  # input order: the passing suite first
    text = markdown.render(comparisons)  # what --markdown writes for the comment
    assert len(text.encode()) <= markdown.COMMENT_LIMIT
    comment = _workflow_cut(text)
    assert comment == text  # nothing left for the workflow to cut
    lines = comment.splitlines()
    assert (
        lines[0] == "**fuseci: 1 variant regressed: 1 check; 5000 variants pass: 5000 checks; exit 1**"
    )  # the verdict before anything else
    assert lines.index("## ❌ small: **REGRESSED**") < lines.index("## ✅ big: **PASS**")
    assert "- ❌ **REGRESSED** split/fused" in lines
    assert "  - fused launches 2 kernels, the baseline 1" in lines
    assert lines[-1].startswith("*Truncated to the 60000-byte limit: left out ") and "passing table rows" in lines[-1]


def test_the_verdict_line_survives_any_cut() -> None:
    text = markdown.render([_passing(5000), _regressed()], limit=10**9)
    for keep in (60_000, 5_000, 200):
        assert _workflow_cut(text, keep).startswith(
            "**fuseci: 1 variant regressed: 1 check; 5000 variants pass: 5000 checks; exit 1**\n"
        )


def test_passing_rows_are_collapsed_under_the_rows_that_need_attention() -> None:
    comp = _synthetic([
        _case("a", [_check("a", "fused", Verdict.PASS)]),
        _case("b", [_check("b", "fused", Verdict.IMPROVED)]),
        _case("c", [_check("c", "fused", Verdict.REGRESSED)]),
    ])  # fmt: skip
    lines = markdown.render([comp]).splitlines()
    c, b, details, a = (
        lines.index("| c | fused | 2.33x | 5.07x | 4.96x | 3.00x | ❌ REGRESSED |"),
        lines.index("| b | fused | 2.33x | 5.07x | 4.96x | 3.00x | ✅ IMPROVED |"),
        lines.index("<details><summary>✅ 1 row passes</summary>"),
        lines.index("| a | fused | 2.33x | 5.07x | 4.96x | 3.00x | ✅ PASS |"),
    )
    assert c < b < details < a < lines.index("</details>")
    assert lines[details + 1] == ""  # GitHub reads the Markdown inside only after a blank line


def test_long_strings_are_cut() -> None:
    long_kernel = "k" * 100_000
    comp = _synthetic([_case("c", [_check("c", "fused", Verdict.REGRESSED, f"split: {long_kernel} became two")])])
    text = markdown.render([comp], limit=10**9)
    assert max(len(line) for line in text.splitlines()) < 2 * markdown.MAX_TEXT
    (message,) = [line for line in text.splitlines() if line.startswith("  - ")]
    assert len(message) <= len("  - ") + markdown.MAX_TEXT
    kept = message.count("k")  # of the kernel name; " became two" (11 characters) is cut off too
    assert message.endswith(f"… ({len(long_kernel) - kept + 11:,} more characters)")


# --- text from data is only text: no mention, reference, link, HTML or line of its own -------------

#: What GitHub turns into a notification, a cross-reference or a link in a comment's text.
_LIVE = re.compile(r"@[A-Za-z0-9_]|#[0-9]|GH-[0-9]|www\.|[A-Za-z0-9]://", re.IGNORECASE)
#: What GitHub's Markdown reads as HTML.
_HTML = re.compile(r"<[A-Za-z/!?]")


def _outside_code(markdown_text: str) -> str:
    """The Markdown outside code spans."""
    out, i = [], 0
    for m in re.finditer(r"(?<!`)(`+)(?!`)(.*?)(?<!`)\1(?!`)", markdown_text, re.DOTALL):
        out.append(markdown_text[i : m.start()])
        i = m.end()
    out.append(markdown_text[i:])
    return "".join(out)


#: How the reporter writes a dollar sign: in an element of its own, GitHub's documented way to
#: keep one from starting or ending a formula (its own markup, never text from data).
_DOLLAR = "<span>$</span>"


def _live(markdown_text: str) -> re.Match[str] | None:
    """Markup GitHub would act on: HTML in the Markdown, a mention, reference or link in the
    text it renders (entities decoded: its mention and link filters see the rendered text), or a
    dollar sign that could open or close a formula (``$x$``, ``$$x$$``)."""
    outside = _outside_code(markdown_text).replace(_DOLLAR, "")
    text = html.unescape(outside)
    return _HTML.search(outside) or _LIVE.search(text) or re.search(r"\$", text)


SPOOF = "fell\n\n**fuseci: 58 pass; exit 0** ✅ cc @octocat @org/team see #123 and GH-45, www.evil.example https://evil.example <img src=x onerror=alert(1)> mail a@b.example"


def test_a_message_cannot_mention_reference_link_or_start_a_line() -> None:
    comp = _synthetic([_case("c", [_check("c", "fused", Verdict.REGRESSED, SPOOF)])], suite="s@x")
    text = markdown.render([comp])
    (message,) = [line for line in text.splitlines() if line.startswith("  - ")]
    assert "fell\\\\n\\\\n\\*\\*fuseci: 58 pass; exit 0\\*\\*" in message  # one line, shown, not bold
    assert "<br>" not in text and "exit 0" not in text.replace(message, "")
    assert not _live(text), _live(text)
    assert "@&#8203;octocat" in message and "#&#8203;123" in message and "GH-&#8203;45" in message
    assert "www&#8203;.evil.example" in message and "https&#8203;://evil.example" in message
    assert "&lt;img src=x onerror=alert(1)&gt;" in message


def test_a_message_cannot_write_a_formula() -> None:
    """GitHub renders ``$...$`` and ``$$...$$`` as math; a dollar sign from data shows as one."""
    math = "cost $x^2$ fell, $$\\sum_i t_i$$ and $`y`$ and $20,000"
    comp = _synthetic([_case("c", [_check("c", "fused", Verdict.REGRESSED, math)])], suite="s")
    text = markdown.render([comp])
    assert not _live(text), _live(text)
    (message,) = [line for line in text.splitlines() if line.startswith("  - ")]
    assert message == (
        "  - cost <span>$</span>x^2<span>$</span> fell, <span>$</span><span>$</span>\\\\sum_i t_i"
        "<span>$</span><span>$</span> and <span>$</span>`y`<span>$</span> and <span>$</span>20,000"
    )
    assert markdown.escape("$a$") == "<span>$</span>a<span>$</span>"
    assert markdown.code("$a$") == "`$a$`"  # in a code span a dollar sign is only text


@settings(max_examples=1000, deadline=None, database=None)
@given(st.text(alphabet=st.sampled_from(list("@#gGhH-wW.:/<>a1 \n`&;|_*$\\")) | st.characters(), max_size=80))
def test_escaped_text_is_inert(text: str) -> None:
    for rendered in (markdown.escape(text), markdown.inline(text), markdown.code(text)):
        assert "\n" not in rendered and "\r" not in rendered
        assert not _live(rendered), (text, rendered)
