"""Shared fixtures: recorded reports from a real GPU, suites, and the gpu marker's skip rule."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

#: The fuzz tests' seed: drawn or taken from FUSECI_FUZZ_SEED, printed, named beside failures.
pytest_plugins = ["fuzzing"]

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
REPORTS = DATA / "reports"
SUITES = ROOT / "suites"


@functools.cache
def _gpu_available() -> str | None:
    """None when a GPU, CuPy and ncu are all usable; otherwise why not."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as exc:  # ImportError, CUDARuntimeError: either way no GPU here
        return f"CuPy/GPU unavailable ({type(exc).__name__})"
    if shutil.which("ncu") is None:
        return "ncu not on PATH"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "gpu" in item.keywords:
            reason = _gpu_available()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"gpu test: {reason}"))


@pytest.fixture
def root() -> Path:
    return ROOT


#: The smallest valid suite, for tests that break one thing at a time.
MINIMAL_SUITE = """\
suite: demo
cases:
  - id: c1
    inputs:
      x: {shape: [1024]}
    variants:
      unfused: kernels.elementwise:scale_relu_add_unfused
      fused: kernels.elementwise:scale_relu_add_fused
"""

ELEMENTWISE = SUITES / "elementwise.yaml"
CLEAN_REPORT = REPORTS / "elementwise.ncu-rep.xz"
REGRESSED_REPORT = REPORTS / "elementwise-regressed.ncu-rep.xz"
H200_BASELINES = ROOT / "baselines"


@pytest.fixture(scope="session")
def clean_kernels():
    """Per-kernel frame of the recorded clean elementwise run."""
    from fuseci.frames.report import read_report

    return read_report(CLEAN_REPORT)


@pytest.fixture(scope="session")
def regressed_kernels():
    """Per-kernel frame of the recorded run with the de-fused scale_relu_add."""
    from fuseci.frames.report import read_report

    return read_report(REGRESSED_REPORT)


def relaxed_elementwise_text() -> str:
    """suites/elementwise.yaml as a user leaves it after accepting the split scale_relu_add of
    the regressed report: its expectations dropped and its bytes allowance off, so that
    ``update-baselines`` may record the split (it refuses to record a broken expectation)."""
    import yaml

    doc = yaml.safe_load(ELEMENTWISE.read_text(encoding="utf-8"))
    for case in doc["cases"]:
        if case["id"] == "scale_relu_add":
            case.pop("expect", None)
            case["bytes_allowance"] = "off"
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.fixture(scope="session")
def relaxed(tmp_path_factory: pytest.TempPathFactory):
    """The elementwise suite that accepts the regressed report (:func:`relaxed_elementwise_text`)."""
    from fuseci.config.parse import load_suite

    path = tmp_path_factory.mktemp("relaxed") / "elementwise.yaml"
    path.write_text(relaxed_elementwise_text(), encoding="utf-8")
    return load_suite(path)


@pytest.fixture(scope="session")
def elementwise():
    from fuseci.config.parse import load_suite

    return load_suite(ELEMENTWISE)


@pytest.fixture
def in_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test from the repository root, so relative suite paths resolve as in README."""
    monkeypatch.chdir(ROOT)
    return ROOT


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` as a test author; its output, stripped."""
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture(autouse=True)
def _not_in_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run in CI too: keep their reports out of the real job's step summary and annotations
    (tests of that output set the variables themselves)."""
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


EXPECTED = DATA / "expected"


def pinned(name: str, text: str) -> None:
    """Compare ``text`` with the whole expected document ``tests/data/expected/NAME``.

    After an intended change, regenerate with ``FUSECI_UPDATE_EXPECTED=1 pytest tests/reporters``
    and review the diff.
    """
    path = EXPECTED / name
    if os.environ.get("FUSECI_UPDATE_EXPECTED"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


#: The one seam where tests stand in for the GPU: every command that measures (run, ab,
#: update-baselines, api.check) measures through what this function returns.
MEASURER = "fuseci.api.session.measurer"


def measure_with(monkeypatch: pytest.MonkeyPatch, tool):
    """Every suite measured through ``tool`` (a :class:`fuseci.api.session.Measurer`), or through
    what ``tool(ncu)`` makes when it is a function; returns ``tool``."""
    monkeypatch.setattr(MEASURER, tool if callable(tool) else lambda ncu=None: tool)
    return tool


class Given:
    """A :class:`fuseci.api.session.Measurer` that measures every suite as ``results`` and whose
    timed passes add nothing; it notes the cases of each pass (:attr:`retimed`)."""

    def __init__(self, results) -> None:
        self.results = results
        self.retimed: list[list[str]] = []

    def ready(self) -> None:
        pass

    def measure(self, suite, options):
        return self.results

    def retime(self, suite, options, results, cases):
        self.retimed.append(cases)
        return results


def recorded_comparison(report: Path, baselines: Path = Path("baselines")):
    """The elementwise suite re-analysed from a recorded report against the committed baselines
    (or those under ``baselines``; call from the repository root: the ``in_root`` fixture)."""
    from fuseci import api
    from fuseci.config.parse import load_suite

    suite = load_suite("suites/elementwise.yaml")
    # As a user types it from the repository root (README): the advice in messages quotes it.
    relative = report.relative_to(ROOT) if report.is_relative_to(ROOT) else report
    return api.check(suite, api.RunOptions(baselines=baselines, from_report=relative))
