"""A model case from a factory (``factory:`` and ``compile:`` of a long-form variant): the suite
format, its messages and schema, the parameters ``fuseci check`` reads, the harness's binding
of a factory's module (with a stand-in for PyTorch, which this machine may lack) and the
record's ``compile_options``. The real module on a GPU is tests/test_gpu_factory.py's."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import CLEAN_REPORT, H200_BASELINES, REPORTS, ROOT, case_of, variant_of, write

from fuseci.config.check import check_files
from fuseci.config.model import COMPILE_MODES, CompileOptions
from fuseci.config.parse import SCHEMA_FILE, check_suite, load_suite, seed_for
from fuseci.errors import HarnessError, SuiteError
from fuseci.records.harness import CaseRecord, CaseStatus, HarnessRecord, read_record

FACTORY = "kernels.model_factories:prenorm"

SUITE = f"""\
suite: blocks
defaults:
  framework: torch
  dtype: bfloat16
  seed: 7
cases:
  - id: prenorm
    inputs:
      x: {{shape: [2, 64, 256]}}
      mask: {{shape: [64], dtype: int32, distribution: randint, low: 0, high: 2}}
    params: {{d: 256, heads: 4}}
    variants:
      unfused:
        factory: {FACTORY}
      compiled:
        factory: {FACTORY}
        compile: true
      tuned:
        factory: {FACTORY}
        compile: {{mode: max-autotune-no-cudagraphs, fullgraph: true, dynamic: false}}
"""


def _load(tmp_path: Path, text: str):
    return load_suite(write(tmp_path / "s.yaml", text))


def _error(tmp_path: Path, text: str, expected: str) -> str:
    """The problem of the suite ``text`` that says ``expected`` (a file may have more)."""
    path = write(tmp_path / "s.yaml", text)
    with pytest.raises(SuiteError):
        load_suite(path)
    found = [str(p) for p in check_suite(path).problems if expected in str(p)]
    assert len(found) == 1, [str(p) for p in check_suite(path).problems]
    assert found[0].startswith(f"{path}:") and "\n" not in found[0], found[0]
    return found[0]


def _variant(spec: str) -> str:
    """SUITE with its ``tuned`` variant written as ``spec`` (a flow mapping)."""
    text = SUITE.split("      tuned:")[0]
    return text + f"      tuned: {spec}\n"


# --- the suite format -------------------------------------------------------------------------------


def test_a_factory_variant_loads_with_its_compile_options_and_seed(tmp_path: Path) -> None:
    case = case_of(_load(tmp_path, SUITE), "prenorm")
    unfused, compiled, tuned = case.variants
    assert [v.fn for v in case.variants] == [FACTORY] * 3
    assert unfused.factory is not None and unfused.factory.compile is None  # eager
    assert compiled.factory is not None and compiled.factory.compile == CompileOptions()
    assert tuned.factory is not None and tuned.factory.compile == CompileOptions(
        "max-autotune-no-cudagraphs", fullgraph=True, dynamic=False
    )
    assert compiled.factory.compile.arguments() == {"mode": "default", "fullgraph": False, "dynamic": None}
    # one seed per (suite seed, case, factory): every variant of the factory builds the same weights
    assert {v.factory.seed for v in case.variants if v.factory} == {seed_for(7, "prenorm", FACTORY)}
    assert unfused.factory.seed != seed_for(0, "prenorm", FACTORY) != seed_for(7, "other", FACTORY)
    assert unfused.line == SUITE.splitlines().index(f"        factory: {FACTORY}") + 1
    assert case.functions == (FACTORY,) and case.frameworks == ("torch",)
    assert case.reference is None


def test_the_fn_form_is_as_it_was(tmp_path: Path) -> None:
    text = _variant("{fn: a.b:c, framework: torch, ledger: true}")
    tuned = variant_of(case_of(_load(tmp_path, text), "prenorm"), "tuned")
    assert tuned.fn == "a.b:c" and tuned.factory is None and tuned.ledger is not None


def test_a_ledger_on_a_compiled_factory_is_taken(tmp_path: Path) -> None:
    tuned = _load(tmp_path, _variant(f"{{factory: {FACTORY}, compile: true, ledger: {{graphs: 1}}}}"))
    assert variant_of(case_of(tuned, "prenorm"), "tuned").ledger.graphs == 1


MESSAGES = {
    "both": (
        f"{{fn: a:b, factory: {FACTORY}}}",
        "case 'prenorm'.variants.tuned: names both fn and factory: keep one",
    ),
    "neither": ("{framework: torch}", "case 'prenorm'.variants.tuned: names neither fn nor factory: add one"),
    "compile with fn": (
        "{fn: a:b, compile: true}",
        "case 'prenorm'.variants.tuned.compile: compiles a factory's module; with fn, call torch.compile",
    ),
    "compile false with fn": ("{fn: a:b, compile: false}", "variants.tuned.compile: compiles a factory's module"),
    "cupy": (
        f"{{factory: {FACTORY}, framework: cupy}}",
        "case 'prenorm'.variants.tuned.factory: returns a torch.nn.Module, but the variant takes cupy arrays; "
        "set `framework: torch`",
    ),
    "eager ledger": (
        f"{{factory: {FACTORY}, ledger: true}}",
        "case 'prenorm'.variants.tuned.ledger: audits a torch.compile'd forward, but the factory's module runs "
        "eagerly: add `compile: true`",
    ),
    "misspelt key": (
        f"{{factory: {FACTORY}, compile: {{fulgraph: true}}}}",
        "case 'prenorm'.variants.tuned.compile: unknown key 'fulgraph'; did you mean 'fullgraph'?",
    ),
    "misspelt mode": (
        f"{{factory: {FACTORY}, compile: {{mode: max_autotune}}}}",
        "case 'prenorm'.variants.tuned.compile.mode: unknown compile mode 'max_autotune'; did you mean 'max-autotune'?",
    ),
    "null": (f"{{factory: {FACTORY}, compile: null}}", "write `compile: true`"),
    "string": (f"{{factory: {FACTORY}, compile: 'yes'}}", "expected true, false or a mapping {mode: ..."),
    "fullgraph string": (f"{{factory: {FACTORY}, compile: {{fullgraph: 'no'}}}}", "compile.fullgraph: "),
    "bad factory": ("{factory: 'torch.nn.Linear'}", "is not a 'module:function' reference"),
}


@pytest.mark.parametrize(("spec", "expected"), MESSAGES.values(), ids=MESSAGES.keys())
def test_a_broken_factory_variant_says_what_and_where_in_one_line(tmp_path: Path, spec: str, expected: str) -> None:
    message = _error(tmp_path, _variant(spec), expected)
    line = len(_variant(spec).splitlines())  # the tuned variant is the file's last line
    assert re.search(rf"s\.yaml:{line}: ", message), message


def test_fuseci_check_reads_the_factory_s_parameters_against_the_params_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The factory takes the params (d, heads), never the inputs (x, mask: the forward's)."""
    monkeypatch.chdir(ROOT)
    good = check_files([write(tmp_path / "suites" / "good.yaml", SUITE)])
    assert good.ok, [p.message for p in good.problems]
    bad = check_files([write(tmp_path / "suites" / "bad.yaml", SUITE.replace("d: 256", "dim: 256"))])
    messages = [p.message for p in bad.problems]
    assert len(messages) == 3, messages  # once per variant, each at its own line
    assert all("prenorm() the case gives 'dim', which it takes no parameter for" in m for m in messages), messages
    assert not any("'x'" in m or "'mask'" in m for m in messages)  # the inputs are the forward's, not the factory's


# --- the schema --------------------------------------------------------------------------------------


def test_the_schema_and_the_loader_agree_on_factories(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    assert list(validator.iter_errors(yaml.safe_load(SUITE))) == []
    assert validator.schema["definitions"]["Compile"]["properties"]["mode"]["enum"] == list(COMPILE_MODES)
    for spec in ("both", "neither", "compile with fn", "misspelt key", "misspelt mode", "null", "string"):
        text = _variant(MESSAGES[spec][0])
        assert list(validator.iter_errors(yaml.safe_load(text))), f"the schema takes {spec}"
        with pytest.raises(SuiteError):
            _load(tmp_path, text)


def test_the_documented_factory_example_validates_and_loads(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "SUITES.md").read_text(encoding="utf-8")
    section = text.split("### A model from a factory", 1)[1]
    example = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert example
    case = _load(tmp_path, example.group(1)).cases[0]
    assert [v.factory is not None for v in case.variants] == [True, True]
    assert variant_of(case, "compiled").ledger is not None and variant_of(case, "compiled").factory.compile.fullgraph


# --- the harness, with a stand-in for PyTorch ---------------------------------------------------------


class _Module:
    """What the stand-in's ``nn.Module`` is: a forward that records its arguments and the seed."""

    def __init__(self, seed: int) -> None:
        self.seed, self.evaluated, self.calls = seed, False, []
        self.dtype = "bfloat16"

    def eval(self) -> _Module:
        self.evaluated = True
        return self

    def double(self) -> _Module:
        self.dtype = "float64"
        return self

    def __call__(self, *args: Any) -> Any:
        self.calls.append((args, torch_state["grad"]))
        return ("out", self.dtype, args)


torch_state: dict[str, Any] = {}


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> types.ModuleType:
    """``torch`` as the factory module needs it (seed, nn.Module, no_grad, compile), and a module
    of factories on the path."""
    torch = types.ModuleType("torch")
    torch_state.clear()
    torch_state.update(seed=None, grad=True, compiled=[])

    @contextlib.contextmanager
    def no_grad():
        torch_state["grad"] = False
        try:
            yield
        finally:
            torch_state["grad"] = True

    def compile_(module: _Module, **options: Any) -> Any:
        torch_state["compiled"].append((module, options))
        return lambda *args: ("compiled", module(*args))

    def manual_seed(seed: int) -> None:
        torch_state["seed"] = seed

    torch.manual_seed = manual_seed  # type: ignore[attr-defined]
    torch.initial_seed = lambda: torch_state["seed"]  # type: ignore[attr-defined]
    torch.nn = types.SimpleNamespace(Module=_Module)  # type: ignore[attr-defined]
    torch.no_grad = no_grad  # type: ignore[attr-defined]
    torch.compile = compile_  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(empty_cache=lambda: None)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    write(
        tmp_path / "fake_factories.py",
        "import torch\n\nBUILT = []\n\n"
        "def block(d, heads):\n    BUILT.append((d, heads))\n    return torch.nn.Module(torch.initial_seed())\n\n"
        "def broken(d, heads):\n    raise FileNotFoundError(f'no checkpoint\\nfor {d}')\n\n"
        "def weights(d, heads):\n    return {'w': d}\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fake_factories", raising=False)
    return torch


def _fake_case(tmp_path: Path, unfused: str = "fake_factories:block", reference: str = ""):
    text = SUITE.replace(f"factory: {FACTORY}", "factory: fake_factories:block", 3)
    text = text.replace("unfused:\n        factory: fake_factories:block", f"unfused:\n        factory: {unfused}")
    if reference:
        text = text.replace("    params:", f"    reference: {reference}\n    params:")
    return _load(tmp_path / "suites", text)


def test_one_module_per_factory_built_under_the_case_s_seed_eager_and_compiled(
    fake_torch: types.ModuleType, tmp_path: Path
) -> None:
    from fuseci.harness.case_runner import _calls

    case = case_of(_fake_case(tmp_path), "prenorm")
    calls, reference = _calls(case, [tmp_path])
    built = sys.modules["fake_factories"].BUILT
    assert built == [(256, 4)]  # once for three variants, with the case's params
    module = torch_state["compiled"][0][0]
    assert module.seed == case.variants[0].factory.seed and module.evaluated
    assert [options for _, options in torch_state["compiled"]] == [
        {"mode": "default", "fullgraph": False, "dynamic": None},
        {"mode": "max-autotune-no-cudagraphs", "fullgraph": True, "dynamic": False},
    ]
    assert all(m is module for m, _ in torch_state["compiled"])  # eager and compiled share it
    # the inputs positionally, in the order the case declares them (x, then mask), without grad
    assert calls["unfused"].raw({"mask": "M", "x": "X"}) == ("out", "bfloat16", ("X", "M"))
    assert calls["compiled"].raw({"mask": "M", "x": "X"}) == ("compiled", ("out", "bfloat16", ("X", "M")))
    assert {grad for _, grad in module.calls} == {False} and torch_state["grad"]
    assert calls["unfused"].params == {} and calls["unfused"].framework.name == "torch"
    # no reference named: a float64 copy of the module, made at its first call, integers as they are
    assert reference is not None and reference.model and "float64 copy" in reference.who
    assert reference.fn(x="X64", mask="M") == ("out", "float64", ("X64", "M"))
    assert module.dtype == "bfloat16"  # the copy, not the variants' module


def test_a_named_reference_is_used_instead_of_the_module_s_copy(fake_torch: types.ModuleType, tmp_path: Path) -> None:
    from fuseci.harness.case_runner import _calls

    write(tmp_path / "fake_reference.py", "def ref(x, mask, d, heads):\n    return x\n")
    _, reference = _calls(case_of(_fake_case(tmp_path, reference="fake_reference:ref"), "prenorm"), [tmp_path])
    assert reference is not None and not reference.model and reference.who == "reference fake_reference:ref"


@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        (
            "fake_factories:broken",
            "variant 'unfused': factory fake_factories:broken raised FileNotFoundError: no checkpoint for 256 at ",
        ),
        (
            "fake_factories:weights",
            "variant 'unfused': factory fake_factories:weights returned dict, not a torch.nn.Module; return the model",
        ),
    ],
    ids=["raises", "not a module"],
)
def test_a_broken_factory_is_the_case_s_error_in_one_line_and_exit_3(
    fake_torch: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elementwise, factory, expected
) -> None:
    """The factory's HarnessError is the case's ERROR record (run_case), which the judge makes an
    ERROR verdict: exit 3."""
    from fuseci.frames.metrics import summarize
    from fuseci.harness import arrays
    from fuseci.harness.arrays import device
    from fuseci.harness.case_runner import _calls, run_case
    from fuseci.judge.compare import compare
    from fuseci.judge.verdict import Verdict, exit_code
    from fuseci.measure import run as measure_run
    from fuseci.measure.run import MeasureOptions
    from fuseci.store import baselines as bl

    suite = _fake_case(tmp_path, unfused=factory)
    case = case_of(suite, "prenorm")
    with pytest.raises(HarnessError) as info:
        _calls(case, [tmp_path])
    assert expected in str(info.value) and "\n" not in str(info.value), info.value
    monkeypatch.setattr(arrays, "runtime_name", lambda: "torch")  # no device here: nothing to free
    monkeypatch.setattr(device, "free_pool", lambda: None)
    record = run_case(suite, case, [tmp_path])
    assert record.status is CaseStatus.ERROR and record.message == str(info.value)
    # the judge: an ERROR record is an ERROR verdict, exit 3 (as any broken case's)
    clean = measure_run.measure(elementwise, MeasureOptions(from_report=CLEAN_REPORT))
    rec = clean.record
    cases = {**rec.cases, "bias_gelu": replace(record, case="bias_gelu")}
    kernels = clean.kernels[clean.kernels.case != "bias_gelu"]
    baseline = bl.load_baseline(H200_BASELINES / "nvidia-h200" / "elementwise.json")
    comparison = compare(summarize(kernels, replace(rec, cases=cases)), elementwise, baseline)
    judged = next(c for c in comparison.cases if c.case == "bias_gelu")
    assert judged.verdict is Verdict.ERROR and expected in judged.checks[-1].message
    assert exit_code([comparison]) == 3


# --- the record ---------------------------------------------------------------------------------------


def test_the_record_holds_the_compile_options_of_the_variants_that_compile(tmp_path: Path) -> None:
    from fuseci.harness.factory import noted
    from fuseci.records.harness import write_record

    case = case_of(_load(tmp_path, SUITE), "prenorm")
    record = noted(case, CaseRecord("prenorm", CaseStatus.OK))
    assert record.compile_options == {
        "compiled": {"mode": "default", "fullgraph": False, "dynamic": None},
        "tuned": {"mode": "max-autotune-no-cudagraphs", "fullgraph": True, "dynamic": False},
    }
    harness = HarnessRecord(suite="blocks", env={}, cases={"prenorm": record}, complete=True)
    write_record(harness, tmp_path / "r.harness.json")
    again = read_record(tmp_path / "r.harness.json")
    assert again.cases["prenorm"].compile_options == record.compile_options
    doc = json.loads((tmp_path / "r.harness.json").read_text(encoding="utf-8"))
    assert doc["cases"]["prenorm"]["compile_options"]["tuned"]["mode"] == "max-autotune-no-cudagraphs"


def test_a_case_without_compiled_factories_records_as_before(tmp_path: Path) -> None:
    from fuseci.harness.factory import noted

    eager_only = SUITE.split("      compiled:")[0] + f"      again:\n        factory: {FACTORY}\n"
    eager = case_of(_load(tmp_path, eager_only), "prenorm")
    record = CaseRecord("prenorm", CaseStatus.OK)
    assert noted(eager, record) is record
    harness = HarnessRecord(suite="blocks", env={}, cases={"prenorm": record})
    assert "compile_options" not in harness.to_json()["cases"]["prenorm"]


@pytest.mark.parametrize("path", sorted(REPORTS.glob("*.harness.json")), ids=lambda p: p.name)
def test_records_written_before_compile_options_still_read(path: Path) -> None:
    """Records of every recorded fixture are read: those written before compile options have none,
    the others have what they wrote (compile_modes: CUDA graphs and dynamic shapes)."""
    raw = json.loads(path.read_text())
    record = read_record(path)
    assert record.cases
    for cid, case in record.cases.items():
        assert case.compile_options == raw["cases"][cid].get("compile_options", {})
    if path.name == "compile_modes.harness.json":
        assert record.cases["graphs"].compile_options["compiled"]["mode"] == "reduce-overhead"
        assert record.cases["dynamic"].compile_options["compiled"]["dynamic"] is True


def test_a_bad_compile_option_in_a_record_is_refused_at_its_place(tmp_path: Path) -> None:
    from fuseci.errors import ReportError

    record = HarnessRecord(
        suite="blocks", env={}, cases={"c": CaseRecord("c", CaseStatus.OK, compile_options={"v": {"mode": "default"}})}
    )
    doc = record.to_json()
    doc["cases"]["c"]["compile_options"]["v"]["mode"] = [1]
    path = tmp_path / "bad.harness.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ReportError, match=r"cases\.c\.compile_options\.v\.mode"):
        read_record(path)
