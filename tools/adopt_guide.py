"""docs/ADOPT.md read as a script: the files it has its reader write and the commands it has
them run, in order, with what each prints. tests/test_adopt.py follows it on a CPU;
tools/rehearse_adopt.py follows it on a GPU machine, then rehearses the workflow it wrote.

A fenced Python or YAML block whose first line is ``# <path>`` is a file to write; a ``console``
block holds ``$`` commands (fuseci's and git's), each followed by what it prints: its stdout, or
when those lines are fuseci's errors (``fuseci: error: ...``), its stderr and exit 3.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "ADOPT.md"
#: The exit status of a command whose shown output is fuseci's errors.
EXIT_ERROR = 3

_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_FILE = re.compile(r"# ([\w./-]+\.(?:py|yaml))")


@dataclass(frozen=True, slots=True)
class Step:
    """One thing the guide has its reader do, in order."""

    command: tuple[str, ...] = ()  # a ``$`` command of a console block, split as a shell splits it
    shown: tuple[str, ...] = ()  # what the guide shows it printing
    path: str = ""  # a file to write, relative to the repository...
    text: str = ""  # ... and its text

    @property
    def exit(self) -> int:
        """The exit status the guide shows: 3 when what it prints is fuseci's errors, else 0."""
        return EXIT_ERROR if self.shown and all(s.startswith("fuseci: error: ") for s in self.shown) else 0

    @property
    def label(self) -> str:
        """The step in a line: its command, or the file it writes."""
        return shlex.join(self.command) if self.command else f"write {self.path}"


@dataclass(frozen=True, slots=True)
class Outcome:
    """A command of the guide, run."""

    step: Step
    returncode: int
    seconds: float
    stdout: str
    stderr: str

    def problem(self) -> str:
        """How it differs from what the guide shows (its exit status, what it printed), or ``""``."""
        said = f"`{self.step.label}` exit {self.returncode}:\n{self.stdout}{self.stderr}"
        if self.returncode != self.step.exit:
            return f"exit {self.returncode}, where the guide shows {self.step.exit}; {said}"
        printed = self.stderr if self.step.exit else self.stdout
        if self.step.shown and printed.splitlines() != list(self.step.shown):
            return f"it printed other lines than the guide shows; {said}"
        if self.step.exit and self.stdout:
            return f"it printed to stdout as well as its errors; {said}"
        return ""


def blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block as (info string, body), in order."""
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(text)]


def steps(text: str) -> list[Step]:
    """The files to write and the ``$`` commands to run, in the guide's order."""
    found: list[Step] = []
    for info, body in blocks(text):
        first = body.splitlines()[0] if body else ""
        if info in ("python", "yaml") and (m := _FILE.fullmatch(first)):
            found.append(Step(path=m.group(1), text=body))
        elif info == "console":
            for chunk in re.split(r"^\$ ", body, flags=re.M)[1:]:
                line, *shown = chunk.splitlines()
                found.append(Step(command=tuple(shlex.split(line)), shown=tuple(shown)))
    return found


def fuseci_commands(text: str) -> list[list[str]]:
    """Every ``fuseci`` command of the guide's sh blocks and console blocks' ``$`` lines."""
    found = []
    for info, body in blocks(text):
        lines = body.splitlines() if info == "sh" else re.findall(r"^\$ (.*)$", body, re.M) if info == "console" else []
        for line in lines:
            if line.startswith("fuseci "):
                found.append(shlex.split(line, comments=True))
    return found


def environment(base: Mapping[str, str]) -> dict[str, str]:
    """The commands' environment: ``base`` without PYTHONPATH, no colour, a wide terminal, a git identity."""
    env = {k: v for k, v in base.items() if k not in ("PYTHONPATH", "FORCE_COLOR")}
    env |= {"NO_COLOR": "1", "COLUMNS": "200", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return env | {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "commit.gpgsign", "GIT_CONFIG_VALUE_0": "false"}


def run(step: Step, repo: Path, fuseci: str, env: Mapping[str, str] | None = None, timeout: float = 120) -> Outcome:
    """Run a command of the guide (fuseci's or git's, else ValueError) in ``repo``."""
    if step.command[0] not in ("fuseci", "git"):
        raise ValueError(f"docs/ADOPT.md: `{step.label}`: only fuseci and git commands are followed")
    exe = fuseci if step.command[0] == "fuseci" else "git"
    start = time.monotonic()
    done = subprocess.run(
        [exe, *step.command[1:]],
        cwd=repo,
        capture_output=True,
        text=True,
        env=environment(os.environ if env is None else env),
        timeout=timeout,
        check=False,
    )
    return Outcome(step, done.returncode, time.monotonic() - start, done.stdout, done.stderr)


def write(repo: Path, step: Step) -> None:
    """Write a file of the guide into ``repo``."""
    path = repo / step.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(step.text, encoding="utf-8")
