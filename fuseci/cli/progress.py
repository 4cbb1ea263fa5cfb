"""What ``fuseci run`` says while it works, and each suite's table as soon as it is judged: nothing (``quiet``),
live status lines (``tty``), plain lines on stderr (``lines``), or plain lines and ``::group::`` sections
(``github``). Every method may be called from any thread."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.text import Text

from fuseci.cli.output import Terminal
from fuseci.reporters.text import clean

if TYPE_CHECKING:
    from fuseci.config.model import Suite
    from fuseci.errors import FuseciError
    from fuseci.judge.verdict import Comparison

#: Seconds between looks at the records of the suites in flight.
POLL_S = 0.5


def choose(quiet: bool) -> str:
    """The display for this process's streams and environment."""
    if quiet:
        return "quiet"
    if os.environ.get("GITHUB_ACTIONS") == "true":
        return "github"
    return "tty" if sys.stderr.isatty() else "lines"


def one_stream() -> bool:
    """Whether stdout and stderr are the same file, terminal or pipe."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's capture), or closed
        return False
    return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


@dataclass(slots=True)
class _Flight:
    """One suite in flight."""

    suite: Suite
    index: int
    total: int
    started: float = field(default_factory=time.monotonic)
    stage: str = "starting"
    watch: Path | None = None
    case: str = ""
    done: int = 0

    def line(self) -> str:
        cases = len(self.suite.cases)
        where = f" · case {self.case} ({min(self.done + 1, cases)}/{cases})" if self.case else ""
        return f"{self.suite.name} ({self.index}/{self.total}): {self.stage}{where} · {time.monotonic() - self.started:.1f} s"


class RunDisplay:
    """A :class:`fuseci.api.Progress` for the command line (see the module docstring)."""

    def __init__(self, mode: str, terminal: Terminal, render: Callable[[Comparison], list[Text]]) -> None:
        self.mode = mode
        self.terminal = terminal
        self.render = render
        self.printed = 0
        self._flights: dict[str, _Flight] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._live: Any = None
        self._poller: threading.Thread | None = None

    def __enter__(self) -> RunDisplay:
        if self.mode == "tty":
            from rich.live import Live

            self._live = Live(
                "",
                console=self.terminal.err,
                refresh_per_second=4,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
        if self.mode != "quiet":
            self._poller = threading.Thread(target=self._poll, name="fuseci-progress", daemon=True)
            self._poller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=2)
        if self._live is not None:
            self._live.stop()

    def suite_started(self, suite: Suite, index: int, total: int) -> None:
        with self._lock:
            self._flights[suite.name] = _Flight(suite, index, total)
        self._news(f"{suite.name} ({index}/{total}): started ({suite.path})")

    def stage(self, suite: Suite, what: str, watch: Path | None = None) -> None:
        with self._lock:
            flight = self._flights.get(suite.name)
            if flight is None:
                return
            flight.stage, flight.watch, flight.case, flight.done = what, watch, "", 0
        self._news(f"{suite.name}: {what}")

    def suite_failed(self, suite: Suite, error: FuseciError) -> None:
        """The error's one line on stderr, unless stdout goes there too (its ERROR block says it)."""
        from fuseci.cli.output import error as say_error

        if not one_stream():
            say_error(str(error))

    def suite_judged(self, comparison: Comparison) -> None:
        with self._lock:
            flight = self._flights.pop(comparison.suite, None)
        took = f" in {time.monotonic() - flight.started:.1f} s" if flight else ""
        if self.mode == "quiet":
            return
        table = self.render(comparison)
        with self._lock:
            self.printed += 1
            if self.mode == "github":
                group = f"::group::{clean(comparison.suite)}: {comparison.verdict.value.upper()}{took}"
                self.terminal.out.show_lines([Text(group), *table, Text("::endgroup::")])
            elif self._live is not None and sys.stdout.isatty():  # one terminal: above the live lines
                self._live.console.print(Group(*table))
            else:
                self.terminal.out.show_lines(table)
        self._news(f"{comparison.suite}: {comparison.verdict.value.upper()}{took}")
        self._redraw()

    def _news(self, text: str) -> None:
        if self.mode in ("lines", "github"):
            self.terminal.err.show(f"fuseci: {clean(text)}\n")
        self._redraw()

    def _redraw(self) -> None:
        if self._live is None:
            return
        with self._lock:
            lines = [f.line() for f in sorted(self._flights.values(), key=lambda f: f.index)]
        self._live.update(Text("\n".join(lines)))

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            with self._lock:
                flights = [f for f in self._flights.values() if f.watch is not None]
            for f in flights:
                running, done = _running(f.watch)
                if running and running != f.case:
                    f.case, f.done = running, done
                    self._news(f"{f.suite.name}: {f.stage}, case {running} ({done + 1}/{len(f.suite.cases)})")
            self._redraw()


def _running(record: Path | None) -> tuple[str, int]:
    """The case a harness record says is running, and how many cases it has finished."""
    if record is None:
        return "", 0
    try:
        doc = json.loads(record.read_text(encoding="utf-8")[: 8 << 20])
    except (OSError, ValueError):
        return "", 0
    if not isinstance(doc, dict):
        return "", 0
    running = doc.get("running")
    cases = doc.get("cases")
    return (running if isinstance(running, str) else ""), (len(cases) if isinstance(cases, dict) else 0)
