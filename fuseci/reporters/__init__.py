"""Output formats: each module renders a string; a new format is a new file plus one line here.

:data:`REPORTS` (judged suites; those with an :attr:`Format.option` give the CLI its ``--FORMAT PATH`` flags and help)
and :data:`BENCH_FORMATS` (``fuseci bench``) name modules imported on first render, so ``fuseci --help`` stays fast."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fuseci.judge.verdict import Comparison
    from fuseci.measure.bench import BenchResult

Renderer = Callable[[list["Comparison"]], str]


class BenchRenderer(Protocol):
    """``fuseci bench``'s renderer; ``code`` is the console's only: the exit code the command ends
    with, which its last line says."""

    def __call__(self, results: list[BenchResult], /, *, code: int | None = None) -> str: ...


@dataclass(frozen=True, slots=True)
class Format:
    """One report format."""

    name: str
    """Its name (``junit``)."""
    module: str
    """The module under :mod:`fuseci.reporters` whose ``render`` makes the document."""
    option: str = ""
    """The command-line option that writes it to a file (``--junit``); empty when it is not
    written on request (the console report, GitHub's annotations)."""
    help: str = ""
    """The option's help."""

    def render(self, *args: Any, **kwargs: Any) -> str:
        """The document (the module's ``render``)."""
        module = importlib.import_module(f"fuseci.reporters.{self.module}")
        return str(module.render(*args, **kwargs))


REPORTS: tuple[Format, ...] = (
    Format("console", "console"),
    Format("junit", "junit", "--junit", "Write a JUnit XML report here (one test case per check)."),
    Format("json", "json", "--json", "Write every number and check as JSON here (read back by `fuseci merge`)."),
    Format(
        "markdown",
        "markdown",
        "--markdown",
        "Write a Markdown summary here (GitHub's step summary format, at most 60,000 bytes: a pull-request comment shows it whole).",
    ),
    Format(
        "html",
        "html",
        "--html",
        "Write a self-contained HTML report here (charts inline; opens offline, e.g. as a CI artifact).",
    ),
    Format("github", "github"),
)

#: Every report format's renderer, by name.
FORMATS: dict[str, Renderer] = {f.name: f.render for f in REPORTS}

#: The formats written to a file on request, in option order.
FILE_FORMATS: tuple[Format, ...] = tuple(f for f in REPORTS if f.option)

#: ``fuseci bench``'s renderers, by name.
BENCH_FORMATS: dict[str, BenchRenderer] = {
    "console": Format("console", "bench_console").render,
    "json": Format("json", "bench_json").render,
}
