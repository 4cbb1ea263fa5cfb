"""The CLI in CI: shards, merging results, GitHub's step summary and annotations."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, REGRESSED_REPORT, REPORTS, invoke

SUITE = "suites/elementwise.yaml"


def _results(tmp_path: Path, report: Path, name: str, suite: str = SUITE) -> Path:
    out = tmp_path / name
    result = invoke("run", suite, "--from-report", str(report), "--json", str(out))
    assert result.exit_code in (0, 1), result.output
    return out


def test_step_summary_and_annotations_under_github_actions(in_root, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    result = invoke("run", SUITE, "--from-report", str(REGRESSED_REPORT), env=env)
    assert result.exit_code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended, never overwritten
    assert "elementwise: **REGRESSED**" in text
    errors = [line for line in result.stdout.splitlines() if line.startswith("::error ")]
    # One regressed variant, one annotation: its 11 regressed checks (the bytes its other kernels
    # asked of memory among them) in it.
    assert len(errors) == 1
    assert errors[0].startswith(
        "::error file=suites/elementwise.yaml,line=17,title=fuseci elementwise/scale_relu_add/fused::"
        "REGRESSED: 11 checks%0A"
    )


def test_no_github_output_outside_github(in_root) -> None:
    result = invoke(
        "run", SUITE, "--from-report", str(REGRESSED_REPORT), env={"GITHUB_ACTIONS": "", "GITHUB_STEP_SUMMARY": ""}
    )
    assert "::error" not in result.stdout


def test_summary_stays_within_githubs_limit(in_root, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("x" * (1024 * 1024 - 2000))  # earlier steps used nearly all of it
    invoke("run", SUITE, "--from-report", str(REGRESSED_REPORT), env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert summary.stat().st_size <= 1024 * 1024


def test_markdown_file(in_root, tmp_path: Path) -> None:
    md = tmp_path / "s.md"
    assert invoke("run", SUITE, "--from-report", str(CLEAN_REPORT), "--markdown", str(md)).exit_code == 0
    assert "elementwise: **PASS**" in md.read_text()


def test_shard_runs_its_share(in_root) -> None:
    # With one suite given, shard 1/2 runs it and shard 2/2 runs nothing and passes.
    first = invoke("run", SUITE, "--from-report", str(CLEAN_REPORT), "--shard", "1/2")
    second = invoke("run", SUITE, "--from-report", str(CLEAN_REPORT), "--shard", "2/2")
    assert first.exit_code == 0 and "fuseci: 10 variants pass: 88 checks" in first.stdout
    assert second.exit_code == 0 and "no suites" in second.stderr and "no checks" in second.stdout
    assert invoke("run", SUITE, "--shard", "3/2").exit_code == 2


def test_merge_combines_results_and_keeps_the_worst_exit(in_root, tmp_path: Path) -> None:
    clean = _results(tmp_path, CLEAN_REPORT, "clean.json")
    reg = _results(tmp_path, REPORTS / "reduction.ncu-rep.xz", "reduction.json", "suites/reduction.yaml")
    junit = tmp_path / "merged.xml"
    ok = invoke("merge", str(clean), str(reg), "--junit", str(junit))
    assert ok.exit_code == 0, ok.output
    assert sorted(s.get("name") for s in ET.parse(junit).getroot().iter("testsuite")) == ["elementwise", "reduction"]
    regressed = _results(tmp_path, REGRESSED_REPORT, "regressed.json")
    bad = invoke("merge", str(reg), str(regressed), "--json", str(tmp_path / "m.json"))
    assert bad.exit_code == 1
    names = [s["suite"] for s in json.loads((tmp_path / "m.json").read_text())["suites"]]
    assert names == ["reduction", "elementwise"]


def test_merge_refuses_two_results_of_one_suite_on_one_card(in_root, tmp_path: Path) -> None:
    clean = _results(tmp_path, CLEAN_REPORT, "clean.json")
    regressed = _results(tmp_path, REGRESSED_REPORT, "regressed.json")
    out = tmp_path / "m.json"
    twice = invoke("merge", str(clean), str(regressed), "--json", str(out))
    assert twice.exit_code == 3 and not out.exists()
    assert twice.stderr == (
        f"fuseci: error: {regressed}: suite 'elementwise' on nvidia-h200 is also in {clean}: two results of one "
        "suite on one card cannot be merged (which should count?); pass one results file per suite and card, "
        "the run you want judged\n"
    )
    same = invoke("merge", str(clean), str(tmp_path / "." / "clean.json"))
    assert same.exit_code == 3 and f"named twice (also as {clean})" in same.stderr


def test_merging_a_merged_file_with_one_of_its_parts_is_refused(in_root, tmp_path: Path) -> None:
    h200 = _results(tmp_path, CLEAN_REPORT, "h200.json")
    h100 = _results(tmp_path, REPORTS / "elementwise-h100.ncu-rep.xz", "h100.json")
    merged = tmp_path / "merged.json"
    assert invoke("merge", str(h200), str(h100), "--json", str(merged)).exit_code == 0
    again = invoke("merge", str(merged), str(h100))
    assert again.exit_code == 3 and "suite 'elementwise' on nvidia-h100-80gb-hbm3 is also in" in again.stderr
    names = [s["suite"] for s in json.loads(merged.read_text())["suites"]]
    assert names == ["elementwise@nvidia-h200", "elementwise@nvidia-h100-80gb-hbm3"]
    # A merged file merges again unchanged, names and all.
    assert invoke("merge", str(merged), "--json", str(tmp_path / "m2.json")).exit_code == 0
    assert json.loads((tmp_path / "m2.json").read_text()) == json.loads(merged.read_text())


def test_suites_that_could_not_run_are_all_kept(in_root, tmp_path: Path) -> None:
    """A suite that failed on two runners knows no card: both errors are shown, numbered."""
    outs = []
    for name in ("a.json", "b.json"):
        out = tmp_path / name
        assert (
            invoke("run", SUITE, "--from-report", str(tmp_path / "none.ncu-rep.xz"), "--json", str(out)).exit_code == 3
        )
        outs.append(str(out))
    merged = tmp_path / "m.json"
    assert invoke("merge", *outs, "--json", str(merged)).exit_code == 3
    names = [s["suite"] for s in json.loads(merged.read_text())["suites"]]
    assert names == ["elementwise@unknown-gpu", "elementwise@unknown-gpu-2"]


def test_merge_names_each_gpu(in_root, tmp_path: Path) -> None:
    h200 = _results(tmp_path, CLEAN_REPORT, "h200.json")
    h100 = _results(tmp_path, REPORTS / "elementwise-h100.ncu-rep.xz", "h100.json")
    junit = tmp_path / "j.xml"
    assert invoke("merge", str(h200), str(h100), "--junit", str(junit)).exit_code == 0
    names = sorted(s.get("name") for s in ET.parse(junit).getroot().iter("testsuite"))
    assert names == ["elementwise@nvidia-h100-80gb-hbm3", "elementwise@nvidia-h200"]


@pytest.mark.parametrize("content", ["{", "[]"])
def test_merge_of_a_bad_file_exits_3(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "r.json"
    bad.write_text(content)
    result = invoke("merge", str(bad))
    assert result.exit_code == 3 and str(bad) in result.stderr


def _edited(path: Path, edit) -> Path:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("spelling", ["scale_relu_add", "Scale_Relu_Add"])
def test_merge_refuses_a_case_listed_twice(in_root, tmp_path: Path, spelling: str) -> None:
    """Counted twice, a case would double the totals (and a regression could hide behind a pass)."""

    def repeat(doc) -> None:
        cases = doc["suites"][0]["cases"]
        cases.append({**next(c for c in cases if c["case"] == "scale_relu_add"), "case": spelling})

    bad = _edited(_results(tmp_path, CLEAN_REPORT, "r.json"), repeat)
    out = tmp_path / "m.json"
    result = invoke("merge", str(bad), "--json", str(out))
    assert result.exit_code == 3, result.output
    assert not out.exists()
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"fuseci: error: {bad}: suites[0].cases: ")
    assert f"case {spelling!r} is listed twice" in line or "only in letter case" in line


def test_merge_refuses_a_variant_listed_twice(in_root, tmp_path: Path) -> None:
    def repeat(doc) -> None:
        variants = doc["suites"][0]["cases"][0]["variants"]
        variants.append(dict(variants[-1]))

    bad = _edited(_results(tmp_path, CLEAN_REPORT, "r.json"), repeat)
    result = invoke("merge", str(bad))
    assert result.exit_code == 3, result.output
    assert f"fuseci: error: {bad}: suites[0].cases[0].variants: " in result.stderr
    assert "is listed twice" in result.stderr


def test_merge_refuses_suite_ids_that_differ_only_in_letter_case(in_root, tmp_path: Path) -> None:
    """Two ids one file system takes for one name (a baseline file each) are not two suites."""
    h200 = _results(tmp_path, CLEAN_REPORT, "h200.json")
    h100 = _edited(
        _results(tmp_path, REPORTS / "elementwise-h100.ncu-rep.xz", "h100.json"),
        lambda doc: doc["suites"][0].update(suite="Elementwise"),
    )
    out = tmp_path / "m.json"
    result = invoke("merge", str(h200), str(h100), "--json", str(out))
    assert result.exit_code == 3 and not out.exists()
    assert result.stderr == (
        f"fuseci: error: {h100}: suite 'Elementwise' differs from 'elementwise' (in {h200}) only in letter case; "
        "suite ids are compared ignoring case, as macOS and Windows compare the file names they give: rename one\n"
    )

    def twice(doc) -> None:
        doc["suites"].append({**doc["suites"][0], "suite": "ELEMENTWISE"})

    one = _edited(_results(tmp_path, CLEAN_REPORT, "one.json"), twice)
    alone = invoke("merge", str(one))
    assert (
        alone.exit_code == 3
        and "suite 'ELEMENTWISE' differs from 'elementwise' (earlier in the same file)" in alone.stderr
    )


def test_a_merged_results_file_fuseci_could_not_read_back_is_not_written(
    in_root, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from fuseci.store import results

    h200 = _results(tmp_path, CLEAN_REPORT, "h200.json")
    h100 = _results(tmp_path, REPORTS / "elementwise-h100.ncu-rep.xz", "h100.json")
    limit = max(h200.stat().st_size, h100.stat().st_size) + 100  # each part is read, the two together are too big
    monkeypatch.setattr(results, "FORMAT", replace(results.FORMAT, max_bytes=limit))
    out, junit = tmp_path / "m.json", tmp_path / "j.xml"
    result = invoke("merge", str(h200), str(h100), "--json", str(out), "--junit", str(junit))
    assert result.exit_code == 3, result.output
    assert not out.exists() and junit.is_file()  # the other reports are written
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("fuseci: error: ")]
    assert line.startswith(f"fuseci: error: {out}: cannot write the json report: a results file of ")
    assert f"more than the {limit:,} bytes fuseci reads back" in line
