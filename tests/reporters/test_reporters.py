"""Reporters, pinned by whole expected documents. Regenerate after an intended change with
``FUSECI_UPDATE_EXPECTED=1 pytest tests/reporters`` and review the diff."""

import io
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, REGRESSED_REPORT, ROOT, pinned, recorded_comparison, regressed_comparisons
from rich.console import Console, Group

from fuseci.judge.verdict import Verdict, failed
from fuseci.reporters import FORMATS, console, html, junit
from fuseci.reporters import json as json_reporter


@pytest.mark.parametrize(
    ("report", "name"), [(CLEAN_REPORT, "elementwise"), (REGRESSED_REPORT, "elementwise-regressed")]
)
def test_junit_document_is_pinned(report: Path, name: str, in_root) -> None:
    pinned(f"{name}.junit.xml", junit.render([recorded_comparison(report)]))


def test_junit_structure(in_root) -> None:
    root = ET.fromstring(junit.render([recorded_comparison(REGRESSED_REPORT)]).encode())
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "elementwise" and suite.get("tests") == "88" and suite.get("failures") == "11"
    failure = suite.find("testcase[@name='scale_relu_add.fused.gain[dram__bytes.sum]']/failure")
    assert failure is not None
    assert "fell from 2.32x to 1.4x (-39.5%); tolerance ±1%" in failure.get("message")


def test_suite_that_could_not_run_is_an_error_testcase(elementwise) -> None:
    root = ET.fromstring(junit.render([failed(elementwise, "ncu not found")]).encode())
    assert root.find("testsuite/testcase/error").get("message") == "ncu not found"


def test_json_holds_every_number(in_root) -> None:
    doc = json.loads(json_reporter.render([recorded_comparison(CLEAN_REPORT)]))
    assert doc["exit_code"] == 0
    (suite,) = doc["suites"]
    assert suite["env"]["gpu_name"] == "NVIDIA H200" and suite["has_baseline"]
    case = suite["cases"][0]
    fused = next(v for v in case["variants"] if v["variant"] == "fused")
    assert fused["values"]["launches"] == 1 and fused["values"]["dram__bytes.sum"] > 7e8
    assert fused["gains"]["launches"] == 3
    (kernel,) = fused["kernels"]
    assert {k: kernel[k] for k in ("name", "grid", "block")} == {
        "name": "fuseci_scale_relu_add",
        "grid": 1056,
        "block": 256,
    }
    # each kernel's counted quantities, and (recorded with one pass) no spread
    assert kernel["counts"]["l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"] == 536870912 and "spread" not in kernel
    assert all("spread" in k for k in fused["baseline_kernels"])  # the baseline's three profiled passes
    gain = next(k for k in case["checks"] if k["check"] == "gain" and k["quantity"] == "dram__bytes.sum")
    assert gain["verdict"] == "pass" and gain["baseline"] == pytest.approx(gain["current"], rel=0.03)


def test_console_table_and_attention_lines(in_root) -> None:
    text = console.render([recorded_comparison(REGRESSED_REPORT)])
    lines = text.splitlines()
    assert lines[0] == "suite elementwise: REGRESSED  suites/elementwise.yaml"
    assert "GPU NVIDIA H200 (sm_90)" in text and "\x1b[" not in text  # no colour unless asked
    # One block for the variant, headed by its verdict and where the case is: the split, then each
    # gain it cost, then the bytes its kernels asked of memory (compared though they are others),
    # then how many of its checks still pass.
    (head,) = [i for i, line in enumerate(lines) if line.startswith("  REGRESSED  scale_relu_add/fused")]
    assert lines[head] == "  REGRESSED  scale_relu_add/fused  suites/elementwise.yaml:17"
    block = lines[head + 1 : lines.index("", head)]
    # Its cause first, said once for the variant, not after each check.
    assert block[0].startswith("    cause: undetermined: its kernels changed (split: fuseci_scale_relu_add became")
    assert "record the baseline again" in block[0]
    assert block[1].startswith("    - fused launches 2 kernels, the baseline 1: the fusion split:")
    # Then the fewest lines that say what moved: the split, the DRAM bytes, the bytes against the
    # minimum; the rest under -v.
    assert block[2] == "    - DRAM bytes gain (unfused ÷ fused) fell from 2.32x to 1.4x (-39.5%); tolerance ±1%"
    assert block[3].startswith("    - fused moved 1.62x the minimum DRAM bytes")
    assert block[4:] == ["    (8 more failing checks: -v)", "    (5 more checks pass)"]
    assert sum("cause:" in line for line in block) == 1 and not any("its kernels changed" in line for line in block[1:])
    full = console.render([recorded_comparison(REGRESSED_REPORT)], verbose=True).splitlines()
    block = full[head + 1 : full.index("", head)]
    assert "    - launches gain (unfused ÷ fused) fell from 3x to 1.5x (-50.0%); tolerance exact" in block
    assert len(block) == 13 and block[-1] == "    (5 more checks pass)"
    assert not any("more failing" in line for line in block)
    counted = [
        line
        for line in block
        if line.endswith("bytes (+50.0%); tolerance exact")
        or "L2 bytes requested" in line
        or "global bytes stored" in line
    ]
    assert [line.split(" of fused rose ")[0] for line in counted] == [
        "    - global bytes loaded",
        "    - global bytes stored",
        "    - L2 bytes requested",
    ]
    assert not any("no baseline value yet" in line for line in block)
    assert "1,306.0 MB for a minimum of 805.3 MB" in text  # the table's unit: 1306.0 in the DRAM MB column
    assert "MiB" not in text
    # The L2 undercount notes: one line; each case's with -v.
    (note,) = [line for line in lines if "DRAM writes" in line]
    assert note.startswith("  note: DRAM writes read up to 9% low in 5 cases") and note.endswith("-v shows each case")
    verbose = console.render([recorded_comparison(REGRESSED_REPORT)], verbose=True)
    assert sum("DRAM writes undercount" in line for line in verbose.splitlines()) == 5
    assert text.rstrip().endswith("fuseci: 1 variant regressed: 11 checks; 9 variants pass: 72 checks; exit 1")


def test_console_colour_is_rich_styles(in_root) -> None:
    """The report's lines carry their colours as styles; a terminal shows them, and only colours
    (no bold or dim), so that rich's NO_COLOR leaves plain text."""
    lines = console.report([recorded_comparison(REGRESSED_REPORT)])
    plain = console.render([recorded_comparison(REGRESSED_REPORT)])
    terminal = Console(file=io.StringIO(), force_terminal=True, color_system="standard", no_color=False, soft_wrap=True)
    terminal.print(Group(*lines))
    coloured = terminal.file.getvalue()
    assert "\x1b[31mREGRESSED\x1b[0m" in coloured and "\x1b[90msuites/elementwise.yaml:17\x1b[0m" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    codes = {code for sgr in re.findall(r"\x1b\[([0-9;]*)m", coloured) for code in sgr.split(";")}
    assert codes == {"0", "31", "90"}  # reset and colours: red, grey; no bold (1) or dim (2)
    terminal = Console(file=io.StringIO(), force_terminal=True, color_system="standard", no_color=True, soft_wrap=True)
    terminal.print(Group(*lines))
    assert terminal.file.getvalue() == plain


def test_first_run_without_baseline_is_one_line(in_root, tmp_path: Path) -> None:
    comparison = recorded_comparison(CLEAN_REPORT, baselines=tmp_path)
    text = console.render([comparison])
    assert not comparison.has_baseline
    (line,) = [line for line in text.splitlines() if "baseline" in line]
    assert line.startswith(f"  NEW: no baseline at {tmp_path}/nvidia-h200/elementwise.json yet, so ")
    # The command that records it from the same report into the same baselines (the bare command
    # recorded nothing: there is no GPU here, and the baselines are not the default ones).
    record = f"fuseci update-baselines suites/elementwise.yaml --from-report {CLEAN_REPORT.relative_to(ROOT)} --baselines {tmp_path}"
    assert line.endswith(f"record one with `{record}`")
    assert "  NEW  " not in text  # no line per check


def test_junit_names_are_unique_and_failures_carry_the_detail(in_root) -> None:
    root = ET.fromstring(junit.render([recorded_comparison(REGRESSED_REPORT)]).encode())
    names = [tc.get("name") for tc in root.iter("testcase")]
    assert len(names) == len(set(names))
    failure = root.find(".//testcase[@name='scale_relu_add.fused.gain[dram__bytes.sum]']/failure")
    body = failure.text.splitlines()
    assert body[0] == "REGRESSED: " + failure.get("message")
    # The variant's cause is said whole in its first failure's body, and pointed to from the others.
    assert body[1] == "cause: undetermined (said in scale_relu_add.fused.inventory[kernels])"
    first = root.find(".//testcase[@name='scale_relu_add.fused.inventory[kernels]']/failure").text.splitlines()
    assert first[1].startswith("cause: undetermined: its kernels changed (split: fuseci_scale_relu_add became")
    assert body[2] == "now 1.402, baseline 2.316, change -39.5%, tolerance ±1%"
    assert any(
        line.startswith("fused kernels now: fuseci_mutant_scale_relu (1056 blocks of 256 threads") for line in body
    )
    assert "fused kernels at baseline: fuseci_scale_relu_add (1056 blocks of 256 threads, 32 registers)" in body
    assert "suite suites/elementwise.yaml, line 17" in body


def test_junit_two_wrong_outputs_of_one_variant_are_two_tests(elementwise) -> None:
    from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, Verdict

    checks = tuple(
        MetricDelta("c", "fused", CheckKind.CORRECTNESS, q, Verdict.WRONG, f"wrong result: {q}")
        for q in ("reference.output0", "first_call.output0", "", "")
    )
    comp = Comparison("s", "suites/s.yaml", {}, None, False, (), (CaseResult("c", 3, "", checks, ()),))
    names = [tc.get("name") for tc in ET.fromstring(junit.render([comp]).encode()).iter("testcase")]
    assert names == [
        "c.fused.correctness[reference.output0]",
        "c.fused.correctness[first_call.output0]",
        "c.fused.correctness",
        "c.fused.correctness#2",
    ]


def test_every_format_is_registered() -> None:
    assert set(FORMATS) == {"console", "json", "junit", "markdown", "github", "html"}


def test_counts_read_in_the_singular_and_the_plural(elementwise, in_root) -> None:
    # A summary counts what a person reads: a suite that could not run, a variant.
    broken = [failed(replace(elementwise, name=f"s{i}"), "ncu missing") for i in range(4)]
    assert console.render(broken).endswith("fuseci: 4 suites in error: 4 checks; exit 3\n")
    assert console.render(broken[:1]).endswith("fuseci: 1 suite in error: 1 check; exit 3\n")
    (comparison,) = regressed_comparisons()
    (case, *rest) = comparison.cases
    warned = replace(case, checks=tuple(replace(k, verdict=Verdict.WARN) for k in case.checks[:2]) + case.checks[2:])
    text = console.render([replace(comparison, cases=(warned, *rest)), *broken[:3]])
    # The two warned checks are the split variant's (regressed) and unfused's (one variant warned).
    assert text.endswith(
        "fuseci: 1 variant regressed: 11 checks; 3 suites in error: 3 checks; 1 variant with warnings: 1 check; "
        "8 variants pass: 70 checks; exit 1\n"
    )
    page = html.render(broken)
    assert ">4 suites in error: 4 checks</span>" in page


def test_a_block_headlines_what_moved_and_counts_the_rest() -> None:
    from fuseci.config import names
    from fuseci.judge.verdict import CheckKind, MetricDelta, Verdict
    from fuseci.reporters.text import headline, more_failing

    def check(kind: CheckKind, quantity: str, verdict: Verdict = Verdict.REGRESSED) -> MetricDelta:
        return MetricDelta("c", "fused", kind, quantity, verdict, quantity)

    time = check(CheckKind.GAIN, names.EVENT_TIME)
    launches = check(CheckKind.GAIN, names.LAUNCHES)
    dram = check(CheckKind.GAIN, names.DRAM_BYTES)
    loads = check(CheckKind.GAIN, names.GLOBAL_LOAD_BYTES)
    split = check(CheckKind.INVENTORY, "")
    warn = check(CheckKind.VALUE, names.OCC_THEORETICAL, Verdict.WARN)
    checks = [time, launches, dram, loads, split, warn]
    # what fails the build before warnings; the plainest first; shown in the block's order
    assert headline(checks) == ((launches, dram, split), 3)
    assert headline(checks, verbose=True) == (tuple(checks), 0)
    assert headline(checks[:4]) == (tuple(checks[:4]), 0)  # one more is shown, not counted
    assert more_failing(1) == "1 more failing check: -v"
