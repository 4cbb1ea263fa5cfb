"""Shared fixtures (the recorded runs parsed, the suites loaded: once per session, that is once per
pytest-xdist worker) and the gpu marker's skip rule. The helpers test files import are in
helpers.py."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    CHROMIUM_ARGS,
    CLEAN_REPORT,
    ELEMENTWISE,
    REGRESSED_REPORT,
    ROOT,
    chromium,
    committed_baselines,
    relaxed_elementwise_text,
)

#: The fuzz tests' seed: drawn or taken from FUSECI_FUZZ_SEED, printed, named beside failures.
pytest_plugins = ["fuzzing"]


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


@pytest.fixture(scope="session")
def relaxed(tmp_path_factory: pytest.TempPathFactory):
    """The elementwise suite that accepts the regressed report (:func:`helpers.relaxed_elementwise_text`)."""
    from fuseci.config.parse import load_suite

    path = tmp_path_factory.mktemp("relaxed") / "elementwise.yaml"
    path.write_text(relaxed_elementwise_text(), encoding="utf-8")
    return load_suite(path)


@pytest.fixture(scope="session")
def elementwise():
    from fuseci.config.parse import load_suite

    return load_suite(ELEMENTWISE)


@pytest.fixture
def committed_copy(tmp_path: Path) -> Path:
    """A copy of the committed baselines in the test's directory; its H200 elementwise file."""
    return committed_baselines(tmp_path)


@pytest.fixture
def in_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test from the repository root, so relative suite paths resolve as in README."""
    monkeypatch.chdir(ROOT)
    return ROOT


@pytest.fixture(scope="session", autouse=True)
def _command_line_built_once() -> Iterator[None]:
    """typer's CliRunner builds fuseci's click command from the app's functions at every
    ``invoke`` (a third of a quick fuzzed command's time); the app never changes during a run:
    build it once per session, as ``fuseci`` builds it once per process."""
    import typer.main
    import typer.testing

    with pytest.MonkeyPatch.context() as patch:
        if hasattr(typer.testing, "_get_command"):
            patch.setattr(typer.testing, "_get_command", functools.cache(typer.main.get_command))
        yield


@pytest.fixture(autouse=True)
def _not_in_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run in CI too: keep their reports out of the real job's step summary and annotations
    (tests of that output set the variables themselves)."""
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The screenshots tests took (their ``screenshot`` property), pass or fail: a line printed
    by the test itself would be lost in a pytest-xdist worker."""
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) == "call":
                for name, value in getattr(report, "user_properties", ()):
                    if name == "screenshot":
                        terminalreporter.write_line(str(value))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium (Debian's), launched once per test module."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
