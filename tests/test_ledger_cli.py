"""``fuseci ledger diff`` and ``fuseci ledger show``: recorded ledgers compared across two files
(the H200's and the H100's stored ledgers, planted breaks built from tests/data/ledger, results
files), hostile files, the JSON document; the node diff of a large ledger; ledger checks cut in
the GitHub annotations as in the console."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import ledgers as L
import pytest
from helpers import ROOT, invoke

from fuseci import __version__
from fuseci.judge.verdict import CheckKind, MetricDelta, Verdict
from fuseci.ledger import store
from fuseci.ledger.diff import diff
from fuseci.records.fusion import Kind, Ledger, Measured, Node, Row
from fuseci.reporters import github
from fuseci.reporters.text import LEDGER_MESSAGE
from fuseci.store import results
from tests.reporters.ledger_results import ledger_comparison, real_ledger

H200 = ROOT / "baselines" / "nvidia-h200" / "models.ledgers.json"
H100 = ROOT / "baselines" / "nvidia-h100-80gb-hbm3" / "models.ledgers.json"
MODEL_KEYS = ["convbn/compiled", "prenorm/compiled", "swiglu/compiled"]


def _suite_file(path: Path, ledgers: dict[str, Ledger]) -> Path:
    store.save_suite(ledgers, path)
    return path


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """The block's ledger as recorded, and with a graph break between its residual add and its
    second norm, each a suite's ledgers file keyed block/compiled."""
    base = _suite_file(tmp_path / "base.ledgers.json", {"block/compiled": real_ledger("block-base")})
    broken = _suite_file(tmp_path / "break.ledgers.json", {"block/compiled": real_ledger("block-break_add_norm")})
    return base, broken


# --- real recordings ----------------------------------------------------------------------------------


def test_h100_against_h200_recordings_of_the_models_suite() -> None:
    result = invoke("ledger", "diff", H100, H200)
    out = result.stdout
    # the same kernels on both cards: no node changed company in any model
    assert out.count("    no node of the model changed company") == 3
    assert [x for x in out.splitlines() if x.endswith("/compiled")] == MODEL_KEYS
    assert "OLD: 135.7 MB of DRAM, floor 51.7 MB (2.6x), 4 kernel calls, 1 graph" in out
    assert "NEW: 130.7 MB of DRAM, floor 51.7 MB (2.5x), 4 kernel calls, 1 graph" in out
    assert "OLD: 565.7 MB of DRAM, floor 58.7 MB (9.6x), 9 kernel calls, 1 graph" in out
    # each card's autotuner chose its own launch shape for convbn's fused batch norm + SiLU + add
    # kernel; the H200's loads 384 KiB more through the LSU (the parameters, per block): global
    # bytes are exact, so it regresses, and the launch shapes the ledgers keep say why
    (finding,) = [x for x in out.splitlines() if x.startswith("    REGRESSED")]
    assert finding.startswith(
        "    REGRESSED bytes: the forward's global bytes rose from 135,692,320 bytes to 136,085,536 bytes "
        "(+393,216 bytes; exact); in triton_poi_fused__native_batch_norm_legit_no_training_add_silu_2"
    )
    assert finding.endswith(
        "launched as 3136x256, now 3328x256 (grid x block): Triton's autotuner chose another launch shape (it "
        "tunes again where the compile cache is cold: keep the caches between runs)"
    )
    assert out.count("ledger: PASS  (0 regressed, 0 notes)") == 1  # prenorm within its bands
    assert "ledger: PASS  (0 regressed, 1 notes)" in out  # swiglu: its residual add's other launch shape
    assert out.splitlines()[0] == f"OLD {H100} (suite's ledgers, fuseci 0.1.0)"
    assert out.splitlines()[-1] == "3 ledgers compared, 1 regressed (exit 1)"
    assert result.exit_code == 1


def test_a_recording_against_itself_passes_and_a_key_narrows_it() -> None:
    result = invoke("ledger", "diff", H200, H200, "--key", "swiglu/compiled")
    assert result.exit_code == 0, result.output
    assert [x for x in result.stdout.splitlines() if x.endswith("/compiled")] == ["swiglu/compiled"]
    assert result.stdout.splitlines()[-1] == "1 ledger compared, 0 regressed (exit 0)"


def test_show_prints_the_table_worst_ratio_first() -> None:
    result = invoke("ledger", "show", H200, "--key", "prenorm/compiled")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[2] == "prenorm/compiled"
    assert lines[3].split() == ["ratio", "requested", "DRAM", "minimum", "launches", "time", "kind", "kernel"]
    assert lines[4].split()[-2:] == ["extern", "extern_kernels.addmm"] and lines[4].split()[0] == "1.04x"
    assert lines[5].strip() == "linear_3 (models.py:73)"  # its nodes on the line under it
    assert max(len(x) for x in lines[3:-2]) <= 120  # a terminal's width, where a row per line took 200
    # recorded before the requested bytes were kept: DRAM ratios, said so
    assert lines[-2] == "  forward: 545.6 MB of DRAM over 9 rows; floor 58.7 MB (9.3x)"
    assert lines[-1].startswith("  note: ratios are of DRAM bytes (this ledger holds no bytes requested by the SMs")
    every = invoke("ledger", "show", H100)
    assert [x for x in every.stdout.splitlines() if x.endswith("/compiled")] == MODEL_KEYS
    # a note is said once: swiglu's two GEMMs of one configuration, the second not profiled again
    (note,) = [x for x in every.stdout.splitlines() if x.startswith("  note: ") and "DRAM bytes" not in x]
    assert note.startswith("  note: 1 of the forward's 6 kernel launches repeat an earlier launch's configuration")


# --- planted breaks -------------------------------------------------------------------------------------


def test_a_planted_break_says_the_add_and_the_norm_were_fused_and_now_are_not(tmp_path: Path) -> None:
    base, broken = _planted(tmp_path)
    result = invoke("ledger", "diff", base, broken)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    (add,) = [x for x in lines if x.startswith("    x (models32.py:25): ")]
    assert add.startswith(
        "    x (models32.py:25): was fused with layer_norm_1 (models32.py:30), add_1 (models32.py:30) in "
        "triton_per_fused_add_native_layer_norm_view_1 (34.5 MB, 14.7 µs) + triton_poi_fused_add_view_3 "
        "(53.1 MB, 17.9 µs); now alone in triton_poi_fused_add_view_1 (34.4 MB, 13.8 µs)"
    )
    (split,) = [x for x in lines if x.startswith("    REGRESSED split: ")]
    assert "triton_per_fused_add_native_layer_norm_view_1" in split and "+16.8 MB global" in split
    assert "    WARN structural: 2 compiled graph(s), was 1" in lines
    assert "  OLD: 526.3 MB of DRAM, floor 58.7 MB (9.0x), 9 kernel calls, 1 graph" in lines
    assert any(x.startswith("  NEW: 538.4 MB of DRAM") and x.endswith("10 kernel calls, 2 graphs") for x in lines)


def test_json_holds_the_changes_and_the_findings(tmp_path: Path) -> None:
    base, broken = _planted(tmp_path)
    out = tmp_path / "diff.json"
    result = invoke("ledger", "diff", base, broken, "--json", out)
    assert result.exit_code == 1, result.output
    doc = json.loads(out.read_text())
    assert (doc["format"], doc["format_version"], doc["exit_code"]) == ("fuseci-ledger-diff", 1, 1)
    assert doc["old"] == {"path": str(base), "kind": "suite's ledgers", "about": [f"fuseci {__version__}"]}
    (entry,) = doc["ledgers"]
    assert entry["key"] == "block/compiled" and entry["verdict"] == "regressed"
    assert (entry["old"]["kernel_calls"], entry["new"]["kernel_calls"], entry["new"]["graphs"]) == (9, 10, 2)
    add = next(c for c in entry["changes"] if c["node"] == "x (models32.py:25)")
    assert add["was_with"] == ["layer_norm_1 (models32.py:30)", "add_1 (models32.py:30)"] and add["now_with"] == []
    assert add["after"] == [{"kernel": "triton_poi_fused_add_view_1", "dram_bytes": 34424576.0, "duration_ns": 13760.0}]
    kinds = [(f["kind"], f["verdict"]) for f in entry["findings"]]
    assert kinds[0] == ("split", "regressed") and ("structural", "warn") in kinds
    assert all(f["message"] in result.stdout for f in entry["findings"] if len(f["message"]) < 600)
    over = invoke("ledger", "diff", base, broken, "--json", base)  # never written over an input
    assert over.exit_code == 3 and "OLD" in over.stderr and json.loads(base.read_text())["ledgers"]


def test_show_names_the_graph_breaks(tmp_path: Path) -> None:
    _, broken = _planted(tmp_path)
    result = invoke("ledger", "show", broken)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[2] == "block/compiled" and lines[-3].startswith("  forward: 538.4 MB of DRAM over 10 rows in 2 graphs")
    assert lines[-1].startswith("  graph break: Graph break in user code at models32.py:27 Graph Break Reason:")


def test_single_ledger_files_and_a_results_file_are_sources_too(tmp_path: Path) -> None:
    single = tmp_path / "base.ledger.json"
    L.save(real_ledger("block-base"), single)
    res = tmp_path / "results.json"
    res.write_text(results.dumps([ledger_comparison()]))  # compiled's ledger: the planted break
    result = invoke("ledger", "diff", single, res)
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[1] == f"NEW {res} (results file, PyTorch 2.11.0, Triton 3.6.0)"
    assert "block/compiled" in result.stdout.splitlines()
    assert "    x (models32.py:25): was fused with layer_norm_1" in result.stdout
    same = invoke("ledger", "diff", res, res, "--key", "block/compiled")
    assert same.exit_code == 0 and "no node of the model changed company" in same.stdout


def test_a_key_in_one_file_only_is_said(tmp_path: Path) -> None:
    old = _suite_file(tmp_path / "a.ledgers.json", {"block/compiled": real_ledger("block-base")})
    both = {"block/compiled": real_ledger("block-base"), "swiglu/compiled": real_ledger("swiglu-base")}
    new = _suite_file(tmp_path / "b.ledgers.json", both)
    result = invoke("ledger", "diff", old, new)
    assert result.exit_code == 0, result.output
    assert "only in NEW: swiglu/compiled (not compared)" in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == "1 ledger compared, 0 regressed (exit 0)"


# --- hostile files --------------------------------------------------------------------------------------


def _refused(*args: object, code: int = 3) -> str:
    result = invoke(*args)
    assert result.exit_code == code, result.output
    (line,) = result.stderr.strip().splitlines()
    return line


def test_truncated_wrong_and_missing_files_are_one_line_each(tmp_path: Path) -> None:
    cut = tmp_path / "cut.ledgers.json"
    cut.write_text(H200.read_text()[:5000])
    assert _refused("ledger", "diff", cut, H100).startswith(f"fuseci: error: {cut}:")
    assert "not JSON" in _refused("ledger", "diff", H200, cut)
    baseline = ROOT / "baselines" / "nvidia-h200" / "models.json"
    assert "not a ledger file" in _refused("ledger", "show", baseline)
    assert "no such file" in _refused("ledger", "diff", H200, tmp_path / "none.json")
    bad = json.loads(H200.read_text())
    bad["ledgers"]["prenorm/compiled"]["rows"][2]["kind"] = "\x1b[31mbogus"
    hostile = tmp_path / "bad.ledgers.json"
    hostile.write_text(json.dumps(bad))
    line = _refused("ledger", "diff", H200, hostile)
    assert 'ledgers["prenorm/compiled"].rows[2].kind: unknown row kind' in line and "\x1b" not in line
    no_ledger = tmp_path / "plain.json"
    comparison = ledger_comparison()
    case = replace(comparison.cases[0], variants=tuple(replace(v, ledger=None) for v in comparison.cases[0].variants))
    no_ledger.write_text(results.dumps([replace(comparison, cases=(case,))]))
    assert "no variant of it has a ledger" in _refused("ledger", "show", no_ledger)


def test_xz_files_read_as_their_text_and_a_bad_one_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``show`` and ``diff`` read a ``.xz`` ledger file as --from-report reads a ``.ncu-rep.xz``."""
    import lzma

    from fuseci.api import ledger_files

    packed = tmp_path / "models.ledgers.json.xz"
    packed.write_bytes(lzma.compress(H200.read_bytes()))
    plain, xz = invoke("ledger", "show", H200), invoke("ledger", "show", packed)
    assert xz.exit_code == 0, xz.output
    assert xz.stdout.splitlines()[1:] == plain.stdout.splitlines()[1:]
    assert xz.stdout.splitlines()[0] == f"file {packed} (suite's ledgers, fuseci 0.1.0)"
    against = invoke("ledger", "diff", packed, H200)
    assert against.exit_code == 0 and against.stdout.splitlines()[-1] == "3 ledgers compared, 0 regressed (exit 0)"
    results_xz = tmp_path / "r.json.xz"
    results_xz.write_bytes(lzma.compress(results.dumps([ledger_comparison()]).encode()))
    assert invoke("ledger", "show", results_xz).exit_code == 0
    cut = tmp_path / "cut.json.xz"
    cut.write_bytes(packed.read_bytes()[:300])
    assert "the .xz stream ends early" in _refused("ledger", "show", cut)
    not_xz = tmp_path / "plain.json.xz"
    not_xz.write_bytes(H200.read_bytes())
    assert "cannot decompress" in _refused("ledger", "show", not_xz)
    # a small file that expands past what any ledger file holds is refused, not read
    monkeypatch.setattr(ledger_files, "_ANY", replace(ledger_files._ANY, max_bytes=1000))
    assert "decompresses to over" in _refused("ledger", "show", packed)


def test_a_missing_key_names_the_file_and_what_it_holds(tmp_path: Path) -> None:
    line = _refused("ledger", "diff", H200, H100, "--key", "prenorm/eager")
    assert line.startswith(f"fuseci: error: {H200}: no ledger 'prenorm/eager' in this suite's ledgers; it holds ")
    assert "convbn/compiled, prenorm/compiled, swiglu/compiled" in line
    assert "no ledger 'x/y'" in _refused("ledger", "show", H100, "--key", "x/y")
    single = tmp_path / "one.json"
    L.save(real_ledger("block-base"), single)
    assert "--key CASE/VARIANT" in _refused("ledger", "diff", single, H100, code=2)
    other = _suite_file(tmp_path / "other.ledgers.json", {"block/compiled": real_ledger("block-base")})
    assert "hold no ledger of one key" in _refused("ledger", "diff", H200, other)


def test_hostile_node_names_print_as_one_line(tmp_path: Path) -> None:
    base = real_ledger("block-base")
    evil = Node("n", "aten.mul.Tensor", "\x1b[2J::error ::x\nnext", "m.py:3: \x1b]8;;x\x07")
    rows = (*base.rows[:-1], replace(base.rows[-1], nodes=(evil, *base.rows[-1].nodes)))
    old = _suite_file(tmp_path / "a.ledgers.json", {"k/v": base})
    new = _suite_file(tmp_path / "b.ledgers.json", {"k/v": replace(base, rows=rows)})
    result = invoke("ledger", "diff", old, new)
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert not any(x.startswith(("::", "next")) for x in result.stdout.splitlines())
    assert invoke("ledger", "show", new).exit_code == 0


def test_usage_lines_of_the_ledger_commands() -> None:
    for name, usage in (("diff", "ledger diff [OPTIONS] OLD NEW"), ("show", "ledger show [OPTIONS] FILE")):
        result = invoke("ledger", name, "--help", env={"COLUMNS": "200"}, prog_name="fuseci")
        assert result.exit_code == 0, result.output
        assert next(x for x in result.output.splitlines() if x.startswith("Usage:")) == f"Usage: fuseci {usage}"
        examples = result.output.split("Examples:", 1)[1].split("\n\n", 1)[0].splitlines()
        examples = [x.strip() for x in examples if x.strip()]
        assert len(examples) == 2 and all(x.startswith(f"fuseci ledger {name} ") for x in examples)
        assert "Exit codes:" in result.output and "<list[" not in result.output


# --- the node diff of a large ledger --------------------------------------------------------------------


def _row(i: int, nodes: tuple[Node, ...], kernel: str = "") -> Row:
    name = kernel or f"triton_k{i}"
    return Row("0/0", name, Kind.TRITON, nodes, Measured(1, 1e6 + i, 1e6, 1e6, 1000.0 + i, (name,)), 10**6)


def _nodes(i: int) -> tuple[Node, ...]:
    """Row ``i``'s 30 nodes, each a pre-grad node of its own on the model's line ``i``."""
    return tuple(Node(f"op_{i}_{j}", "aten.add.Tensor", f"s{i}_{j}", f"model.py:{i}: y{i} = f(x)") for j in range(30))


def test_a_400_row_ledger_of_30_nodes_a_row_diffs_every_moved_node() -> None:
    old = Ledger(tuple(_row(i, _nodes(i)) for i in range(400)), 10**9, ("0/0",))
    rows = list(old.rows)
    rows[7:8] = [_row(7, _nodes(7)[:15], "triton_k7a"), _row(7, _nodes(7)[15:], "triton_k7b")]  # split
    rows[101:103] = [_row(100, _nodes(100) + _nodes(101), "triton_k100_101")]  # merged
    new = Ledger(tuple(rows), 10**9, ("0/0",))
    changes = diff(old, new)
    assert len(changes) == 30 + 60  # the split row's nodes and the merged rows': no other
    labels = [f"s7_{j} (model.py:7)" for j in range(30)]
    first = changes[0]
    assert first.node == labels[0]
    assert first.was_with == tuple(labels[1:]) and first.now_with == tuple(labels[1:15])
    assert [r.kernel for r in first.before] == ["triton_k7"] and [r.kernel for r in first.after] == ["triton_k7a"]
    assert changes[15].node == labels[15] and changes[15].now_with == tuple(labels[16:])
    merged = changes[30]
    assert merged.node == "s100_0 (model.py:100)" and len(merged.now_with) == 59 and len(merged.was_with) == 29
    assert merged.now_with[-1] == "s101_29 (model.py:101)"
    assert merged.line().endswith("and 53 more in triton_k100_101 (1.0 MB, 1.1 µs)")
    assert diff(old, old) == []


# --- annotations --------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", [CheckKind.LEDGER, CheckKind.GAIN])
def test_annotations_cut_a_ledger_message_as_the_console_does(check: CheckKind) -> None:
    long = "x (block.py:17) ran in k1; " * 300
    comparison = ledger_comparison()
    case = replace(
        comparison.cases[0], checks=(MetricDelta("block", "compiled", check, "split", Verdict.REGRESSED, long),)
    )
    (line,) = github.render([replace(comparison, cases=(case,))]).splitlines()
    body = line.split("::", 2)[2]
    if check is CheckKind.LEDGER:
        assert body.startswith("REGRESSED: " + long[:LEDGER_MESSAGE]) and body.endswith(" more characters)")
        assert len(body) < LEDGER_MESSAGE + 60
    else:  # other checks' messages are their own
        assert body == "REGRESSED: " + long


def test_an_absurd_value_in_a_ledgers_file_is_refused_naming_file_and_place(tmp_path: Path) -> None:
    """1.797e308 is finite and schema-shaped, but no bytes count: summed, it overflowed."""
    hostile = tmp_path / "models.ledgers.json"
    hostile.write_text(re.sub(r'"dram_bytes": [0-9.e+]+', '"dram_bytes": 1.797e308', Path(H200).read_text(), count=1))
    for args in (("ledger", "diff", hostile, H200), ("ledger", "diff", H200, hostile), ("ledger", "show", hostile)):
        result = invoke(*args)
        assert result.exit_code == 3, result.output
        (line,) = [x for x in result.output.splitlines() if x.startswith("fuseci: error:")]
        assert str(hostile) in line and "dram_bytes" in line and "Traceback" not in result.output, result.output
