"""The terminal a command prints to, drawn by rich (imported only by commands that print a report)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from rich.console import Console, Group
from rich.text import Text

from fuseci.cli.output import lost


class Stream(Console):
    """stdout or stderr as rich draws it: text as given (no markup, emoji or wrapping), colour as rich decides (an
    Actions log counts as a terminal); a reader gone, a full disk or a closed file noted in :attr:`lost`, not fatal."""

    def __init__(self, *, stderr: bool = False) -> None:
        super().__init__(
            stderr=stderr,
            force_terminal=True if os.environ.get("GITHUB_ACTIONS") == "true" else None,
            markup=False,
            emoji=False,
            highlight=False,
            soft_wrap=True,
        )
        self.lost = False
        """Whether the reader went away: what was printed since went nowhere."""

    def show(self, text: str) -> bool:
        """Print ``text`` as it is (it ends its own lines); False once no one reads it."""
        return self._print(Text(text), end="")

    def show_lines(self, lines: Sequence[Text]) -> bool:
        """Print each of ``lines`` on a line of its own; False once no one reads them."""
        return self._print(Group(*lines))

    def _print(self, renderable: Text | Group, end: str = "\n") -> bool:
        try:
            self.print(renderable, end=end)
        except (OSError, ValueError) as exc:  # a full disk, a closed file; a closed pipe in a rich without the hook
            self._lose(exc)
        return not self.lost

    def on_broken_pipe(self) -> None:
        """rich's hook for a closed pipe: note it and print nothing more."""
        self._lose(BrokenPipeError("the reader went away"))

    def _lose(self, why: BaseException) -> None:
        self.lost = True
        self.quiet = True
        lost(stderr=self.stderr, why=why)
