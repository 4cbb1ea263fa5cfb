"""The audit of ``fuseci ab``'s case fingerprints (fuseci.ab.audit): what the harness saw a case
run and read against what its fingerprint covers; a miss is an ERROR naming it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, REPORTS, measure_with, write
from test_ab import Recorded, _pair, _side

from fuseci.ab import audit
from fuseci.ab.fingerprint import fingerprint
from fuseci.api import ab
from fuseci.config.parse import load_suite
from fuseci.frames.metrics import SuiteResults
from fuseci.harness.watch import Watch
from fuseci.judge.verdict import CheckKind, Verdict, exit_code
from fuseci.records.harness import CaseRecord, CaseStatus, HarnessRecord, read_record

_SUITE = """suite: s
cases:
  - id: a
    inputs:
      x: {shape: [4]}
    variants:
      unfused: kernels.uses:a
      fused: kernels.uses:a
  - id: b
    inputs:
      x: {shape: [4]}
    variants:
      unfused: kernels.fills:b
      fused: kernels.fills:b
"""

#: Case a calls through a registry that the module of case b fills when the harness imports it:
#: no import, name or decorator of a's module leads there.
_FILES = {
    "kernels/__init__.py": "",
    "kernels/registry.py": "KERNELS = {}\n",
    "kernels/uses.py": (
        "from kernels.registry import KERNELS\n\n\ndef helper(x):\n    return x\n\n\ndef unused(x):\n    return -x\n\n\n"
        "def a(x):\n    return KERNELS['double'](helper(x))\n"
    ),
    "kernels/fills.py": (
        "from kernels.registry import KERNELS\n\n\ndef double(x):\n    return 2 * x\n\n\n"
        "KERNELS['double'] = double\n\n\ndef b(x):\n    return x\n"
    ),
    "kernels/table.bin": "1 2 3\n",
    "suites/s.yaml": _SUITE,
}


def _kernels_modules() -> list[str]:
    return [m for m in sys.modules if m == "kernels" or m.startswith("kernels.")]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A tree with a package ``kernels`` of its own, imported for the test and forgotten after
    it: the repository's ``kernels`` (its own modules, which later tests import) comes back."""
    root = tmp_path / "tree"
    for rel, text in _FILES.items():
        write(root / rel, text)
    monkeypatch.syspath_prepend(str(root))
    saved = {name: sys.modules.pop(name) for name in _kernels_modules()}
    yield root
    for name in _kernels_modules():
        del sys.modules[name]
    sys.modules.update(saved)


def _as_the_harness_runs(root: Path, case: str, call) -> CaseRecord:
    """What the harness records of ``case``: every named module imported under the watch (as
    its preload does), then the case's checked call."""
    watch = Watch(root)
    for module in ("kernels.fills", "kernels.uses"):
        with watch.importing(module):
            importlib.import_module(module)
    with watch.checking(case, ["kernels.uses"]):
        call()
    seen = watch.cases[case]
    ran = {p: tuple(sorted(lines)) for p, lines in seen.ran.items()}
    return CaseRecord(case, CaseStatus.OK, ran=ran, read=tuple(sorted(seen.read)))


def test_a_registry_the_reader_cannot_see_is_found_by_the_first_run_that_exercises_it(tree: Path) -> None:
    suite = load_suite(tree / "suites" / "s.yaml")
    prints = fingerprint(suite, tree).cases
    assert "kernels/fills.py" not in prints["a"].files  # the static reader does not see it
    record = _as_the_harness_runs(tree, "a", lambda: importlib.import_module("kernels.uses").a(1))
    assert "kernels/fills.py" in record.ran
    assert audit.misses(record, prints["a"], tree) == ["ran kernels/fills.py"]


def test_a_function_of_the_cases_own_module_it_does_not_reach_is_a_miss(tree: Path) -> None:
    prints = fingerprint(load_suite(tree / "suites" / "s.yaml"), tree).cases
    covered = prints["a"]
    assert covered.functions["kernels/uses.py"] >= {"a", "helper"}
    ok = CaseRecord("a", CaseStatus.OK, ran={"kernels/uses.py": (0, 4, 12), "kernels/registry.py": (0,)})
    assert audit.misses(ok, covered, tree) == []
    unused = replace(ok, ran={"kernels/uses.py": (0, 8)})  # unused() ran: a reaches it through nothing it names
    assert audit.misses(unused, covered, tree) == ["ran unused (kernels/uses.py:8)"]
    # its own source read (inspect, linecache, Triton) is covered; a data file it does not name is not
    read = replace(ok, read=("kernels/table.bin", "kernels/uses.py"))
    assert audit.misses(read, covered, tree) == ["read kernels/table.bin"]


def test_a_case_that_is_always_measured_is_not_audited(tree: Path) -> None:
    uses = tree / "kernels" / "uses.py"
    uses.write_text(uses.read_text() + "\n\ndef load(p):\n    return open(p).read()\n")
    suite = load_suite(tree / "suites" / "s.yaml")
    assert fingerprint(suite, tree).cases["a"].unproven
    record = replace(
        ab_record(),
        cases={"a": CaseRecord("a", CaseStatus.OK, ran={"kernels/fills.py": (0,)}, read=("elsewhere.txt",))},
    )
    side = audit.Ran(fingerprint(suite, tree).cases, tree.resolve(), record, "the working tree")
    assert audit.side_checks(side) == {}


def ab_record() -> HarnessRecord:
    return read_record(REPORTS / "elementwise.harness.json")


class _Watched(Recorded):
    """Recorded reports whose head record says case ``scale_relu_add`` ran a file of the tree its
    fingerprint does not cover (as a harness under fuseci ab would write it)."""

    def measure(self, suite, options) -> SuiteResults:
        got = super().measure(suite, options)
        if self.side(options) != "head":
            return got
        case = got.record.cases["scale_relu_add"]
        ran = {"kernels/elementwise.py": (0,), "kernels/vendor/x.py": (0, 3)}
        record = got.record.with_cases({"scale_relu_add": replace(case, ran=ran)})
        return replace(got, record=record)


def test_a_miss_is_an_error_of_the_case_in_fuseci_ab(monkeypatch: pytest.MonkeyPatch) -> None:
    pair = _pair("elementwise")
    measure_with(monkeypatch, _Watched({"elementwise": CLEAN_REPORT}, {"elementwise": CLEAN_REPORT}))
    options = ab.AbOptions(report_dir=Path("out"))
    (c,) = ab.run_ab([pair], _side("base"), _side("head"), options).comparisons
    errors = [k for case in c.cases for k in case.checks if k.verdict is Verdict.ERROR]
    (error,) = errors
    assert error.case == "scale_relu_add" and error.check is CheckKind.CASE
    assert error.message.startswith(
        "the working tree ran kernels/vendor/x.py, which the fingerprint of case 'scale_relu_add' does not cover: "
    )
    assert "--all" in error.message and exit_code([c]) == 3
    # the other cases, and a record that was not watched, stay as they were
    assert {case.case for case in c.cases if case.verdict is Verdict.ERROR} == {"scale_relu_add"}
