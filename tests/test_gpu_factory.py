"""A model case from a factory on a real GPU (``factory:`` and ``compile:``): through ``fuseci
run``, the pre-norm block of kernels/model_factories.py runs eagerly and compiled, each variant
checked against the float64 copy of the module fuseci makes; a factory that raises, or returns
no module, is the case's error in one line (exit 3); the module's weights are the same in every
process. gpu-marked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import case_of, variant_of
from typer.testing import CliRunner

from fuseci.cli import app

pytestmark = pytest.mark.gpu

FACTORIES = "kernels.model_factories"

#: A small block (the ledger's models.yaml holds the large ones): 4 x 256 tokens of 512, 8 heads.
SUITE = f"""\
suite: factories
defaults:
  framework: torch
  dtype: bfloat16
  correctness: {{rtol: 4.0e-2, atol: 6.0e-2}}   # a whole block in bf16, as suites/models.yaml
  bytes_allowance: "off"
cases:
  - id: prenorm
    inputs:
      x: {{shape: [4, 256, 512]}}
    params: {{d: 512, heads: 8}}
    variants:
      unfused:
        factory: {FACTORIES}:prenorm
      compiled:
        factory: {FACTORIES}:prenorm
        compile: true
      fullgraph:
        factory: {FACTORIES}:prenorm
        compile: {{mode: default, fullgraph: true, dynamic: false}}
"""


def _run(tmp_path: Path, text: str) -> tuple[int, str, dict, dict]:
    """``fuseci run`` of the suite ``text`` (in tmp_path/suites): its exit code, output, results
    document and harness record."""
    suite = tmp_path / "suites" / "factories.yaml"
    suite.parent.mkdir(exist_ok=True)
    suite.write_text(text)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["run", str(suite), "--baselines", str(tmp_path / "b"), "--report-dir", str(out),
         "--json", str(tmp_path / "r.json")],
    )  # fmt: skip
    doc = json.loads((tmp_path / "r.json").read_text()) if (tmp_path / "r.json").exists() else {}
    record_path = out / "factories.harness.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    return result.exit_code, result.output, doc, record


def test_eager_and_compiled_modules_agree_with_their_float64_copy(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root)
    code, output, doc, record = _run(tmp_path, SUITE)
    assert code == 0, output
    case = record["cases"]["prenorm"]
    assert case["status"] == "ok", case["message"]
    checks = case["checks"]
    for vid in ("unfused", "compiled", "fullgraph"):
        against = {k["against"] for k in checks if k["variant"] == vid}
        assert "reference" in against, (vid, against)  # the case names no reference: fuseci made one
        assert all(k["passed"] for k in checks if k["variant"] == vid), [k for k in checks if not k["passed"]]
    assert case["compile_options"] == {
        "compiled": {"mode": "default", "fullgraph": False, "dynamic": None},
        "fullgraph": {"mode": "default", "fullgraph": True, "dynamic": False},
    }
    assert case["measured"] == ["unfused", "compiled", "fullgraph"]
    launches = {v["variant"]: v["values"]["launches"] for v in doc["suites"][0]["cases"][0]["variants"]}
    assert all(n > 0 for n in launches.values()) and set(launches) == set(case["measured"]), launches


@pytest.mark.parametrize(
    ("factory", "said"),
    [
        ("prenorm_missing_weights", "raised FileNotFoundError: no checkpoint prenorm-512x8.pt for this block at "),
        ("prenorm_weights_only", "returned collections.OrderedDict, not a torch.nn.Module"),
    ],
    ids=["raises", "not a module"],
)
def test_a_broken_factory_is_the_case_s_error_in_one_line(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch, factory: str, said: str
) -> None:
    monkeypatch.chdir(root)
    text = SUITE.replace(
        f"unfused:\n        factory: {FACTORIES}:prenorm", f"unfused:\n        factory: {FACTORIES}:{factory}"
    )
    code, output, doc, record = _run(tmp_path, text)
    assert code == 3, output
    case = record["cases"]["prenorm"]
    assert case["status"] == "error" and "\n" not in case["message"], case
    assert case["message"].startswith(f"variant 'unfused': factory {FACTORIES}:{factory} {said}"), case["message"]
    assert doc["suites"][0]["cases"][0]["verdict"] == "error"
    assert factory in output, output


def test_every_process_builds_the_same_weights_and_variants_share_them(root: Path, tmp_path: Path) -> None:
    """Two builds of the case (as two processes make them) hold the same weights; another case's
    seed draws others; the eager and the compiled variant run one module."""
    import torch

    from fuseci.config.parse import load_suite
    from fuseci.harness import arrays
    from fuseci.harness.case_runner import resolve
    from fuseci.harness.factory import Models

    framework = arrays.get("torch")
    framework.load()
    framework.start()
    path = tmp_path / "suites" / "factories.yaml"
    path.parent.mkdir()
    path.write_text(SUITE + SUITE.split("cases:\n", 1)[1].replace("id: prenorm", "id: prenorm_other"))
    suite = load_suite(path)
    case, other = case_of(suite, "prenorm"), case_of(suite, "prenorm_other")

    def weights(c) -> dict[str, torch.Tensor]:
        return Models(c, lambda ref: resolve(ref, [root])).module(c.variants[0]).state_dict()

    first, second, third = weights(case), weights(case), weights(other)
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert not all(torch.equal(first[k], third[k]) for k in first if first[k].dtype.is_floating_point)
    models = Models(case, lambda ref: resolve(ref, [root]))
    assert models.module(variant_of(case, "unfused")) is models.module(variant_of(case, "compiled"))
    assert not models.module(variant_of(case, "unfused")).training  # put in eval mode


def test_a_graph_compiled_for_dynamic_shapes_records_its_sizes_and_gets_a_minimum(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture of a forward compiled with ``dynamic: true`` holds each symbol's value in the
    run, so the ledger's rows of that graph get a minimum instead of 'its sizes are symbols'."""
    monkeypatch.chdir(root)
    text = SUITE.split("      fullgraph:\n")[0].replace(
        "        compile: true\n", "        compile: {dynamic: true}\n        ledger: {graphs: 1}\n"
    )
    code, output, _, record = _run(tmp_path, text)
    assert code == 0, output
    sizes = record["cases"]["prenorm"]["provenance"]["compiled"]["sizes"]
    assert sizes and all(v > 0 for graph in sizes.values() for v in graph.values()), sizes
    assert 256 in {v for graph in sizes.values() for v in graph.values()}  # 4 x 256 tokens of 512
    assert "its sizes are symbols" not in output
