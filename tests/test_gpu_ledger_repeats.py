"""A ledger's ``repeats: once`` on a real GPU: a model whose launches repeat (a stack of
pre-norm blocks, compiled as one graph and block by block) gives the same ledger whether each
repeating launch is profiled or counted with its configuration's first launch. gpu-marked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuseci.cli import app

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent

CASE = """
  - id: {id}
    inputs:
      x: {{shape: [2, 256, 1024]}}
    params: {{depth: 3}}
    reference: kernels.models:stack_reference
    variants:
      unfused: kernels.models:stack_eager
      graph:
        fn: kernels.models:stack_compiled
        ledger: {{graphs: 1, repeats: {repeats}}}
      blocks:
        fn: kernels.models:stack_blocks_compiled
        ledger: {{repeats: {repeats}}}
"""

SUITE = """
suite: repeats
defaults:
  framework: torch
  dtype: bfloat16
  correctness: {rtol: 6.0e-2, atol: 1.5e-1}   # three bf16 blocks deep
  bytes_allowance: "off"
cases:
"""


def _rows(variant: dict) -> list[dict]:
    return variant["ledger"]["rows"]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict, dict]:
    tmp = tmp_path_factory.mktemp("repeats")
    suite = tmp / "repeats.yaml"
    suite.write_text(SUITE + CASE.format(id="once", repeats="once") + CASE.format(id="every", repeats="every"))
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(
            app,
            ["run", str(suite), "--baselines", str(tmp / "b"), "--report-dir", str(tmp / "out"),
             "--json", str(tmp / "r.json")],
        )  # fmt: skip
    finally:
        os.chdir(here)
    doc = json.loads((tmp / "r.json").read_text())
    record = json.loads((tmp / "out" / "repeats.harness.json").read_text())
    cases = {c["case"]: {v["variant"]: v for v in c["variants"]} for c in doc["suites"][0]["cases"]}
    return result.exit_code, result.output, cases, record


def test_repeating_launches_are_left_out_and_counted_back(ran: tuple[int, str, dict, dict]) -> None:
    code, output, cases, record = ran
    assert code == 0, output
    for variant in ("graph", "blocks"):
        left_out = record["cases"]["once"]["provenance"][variant]["repeats"]["0"]
        assert left_out, f"{variant}: no launch repeated another's configuration"
        assert all(len(r) == 3 and r[1] < r[0] for r in left_out)
        assert "repeats" not in record["cases"]["every"]["provenance"][variant]
        once, every = _rows(cases["once"][variant]), _rows(cases["every"][variant])
        assert [(r["kernel"], r["kind"]) for r in once] == [(r["kernel"], r["kind"]) for r in every]
        assert not [r for r in once if r["kind"] == "untraced"], once
        for a, b in zip(once, every, strict=True):
            assert a["measured"]["launches"] == b["measured"]["launches"], (variant, a["kernel"])
            if a["kind"] == "triton":  # Inductor's kernels repeat their global bytes exactly
                assert a["measured"]["global_bytes"] == b["measured"]["global_bytes"], (variant, a["kernel"])
            assert a["measured"]["dram_bytes"] == pytest.approx(b["measured"]["dram_bytes"], rel=0.1)
        copied = [r for r in once if "not profiled again" in r["note"]]
        assert copied, f"{variant}: no row says which launches were counted from an earlier one"
        assert cases["once"][variant]["values"]["launches"] == cases["every"][variant]["values"]["launches"]


def test_one_graph_run_per_block_is_a_run_of_its_own(ran: tuple[int, str, dict, dict]) -> None:
    """Compiled block by block, one graph runs three times: each of its calls holds three
    launches, the later two counted from the first run's."""
    _, _, cases, _ = ran
    rows = _rows(cases["once"]["blocks"])
    triton = [r for r in rows if r["kind"] == "triton"]
    assert triton and all(r["measured"]["launches"] == 3 for r in triton), triton
