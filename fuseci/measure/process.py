"""Run a child process (ncu, or the timed harness) with its output in a log file, under a limit,
in a session of its own so that a timeout stops it and everything it started. Every live child
is known here, so that Ctrl-C, or a job's SIGTERM or SIGHUP (:func:`cancel_on_signals`), stops
them all (:func:`stop_all`)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from fuseci.errors import Cancelled

log = logging.getLogger(__name__)

#: The signals that end a job, turned into :class:`~fuseci.errors.Cancelled` while held.
ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Cancelling:
    """How many :func:`cancel_on_signals` blocks are open, and whether a signal was raised (the next wait)."""

    depth = 0
    raised = False


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _Cancelling.raised:
        return
    _Cancelling.raised = True
    raise Cancelled(signum)


@contextmanager
def cancel_on_signals() -> Iterator[None]:
    """While held (in the main thread only), SIGTERM and SIGHUP raise :class:`~fuseci.errors.Cancelled`, once;
    a signal ignored at the start (``nohup``) stays ignored, and the old handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.getsignal(sig) for sig in ENDING_SIGNALS}
    _Cancelling.depth += 1
    try:
        for sig, handler in old.items():
            if handler is not signal.SIG_IGN:
                signal.signal(sig, _on_signal)
        yield
    finally:
        for sig, handler in old.items():
            if handler is not None:  # None: set from outside Python; leave what is there
                signal.signal(sig, handler)
        _Cancelling.depth -= 1
        if not _Cancelling.depth:
            _Cancelling.raised = False


_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()


#: How a Python child writes into its log (``PYTHONIOENCODING``): UTF-8, and what cannot be
#: encoded (a lone surrogate) as an escape rather than an error.
LOG_ENCODING = "utf-8:backslashreplace"

#: The most of a log's end that :func:`tail` reads (a kernel that prints in a loop can leave gigabytes).
TAIL_BYTES = 64 * 1024


def tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file (of its last :data:`TAIL_BYTES`); empty when unreadable."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(size - TAIL_BYTES, 0))
            text = fh.read(TAIL_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def one_line(text: str) -> str:
    """Lines of a log (:func:`tail`) as one line, ``" | "`` between them, for a one-line message."""
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the child and everything it started, then make sure they are gone."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def start_logged(
    argv: list[str], log_path: Path, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` (never a shell) in a session of its own, output in ``log_path`` (:data:`LOG_ENCODING`)
    and ``env`` added to this process's environment.

    Raises:
        FileNotFoundError: ``argv[0]`` does not exist.
        PermissionError: ``argv[0]`` may not be executed.
    """
    log.info("running %s", " ".join(argv))
    with log_path.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            env={**os.environ, **(env or {}), "PYTHONIOENCODING": LOG_ENCODING},
        )
    with _LIVE_LOCK:
        _LIVE.add(proc)
    return proc


def finish(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    """Wait for a child started by :func:`start_logged`.

    Returns:
        The exit status; negative when a signal killed the child.

    Raises:
        subprocess.TimeoutExpired: it ran past ``timeout_s``; it and its children were stopped.
    """
    try:
        return proc.wait(timeout=timeout_s)
    except BaseException:  # the timeout, or Ctrl-C: leave no child behind
        _stop(proc)
        raise
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a child and everything it started (a no-op when it has exited)."""
    if proc.poll() is None:
        _stop(proc)
    with _LIVE_LOCK:
        _LIVE.discard(proc)


def stop_all() -> None:
    """Stop every child still running (Ctrl-C, or a bug, in a run with suites in flight)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for proc in live:
        stop(proc)


def run_logged(
    argv: list[str],
    log_path: Path,
    timeout_s: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    started: Callable[[], object] | None = None,
) -> int:
    """Run ``argv`` (never a shell), output in ``log_path``; ``started`` is called before waiting for it.

    Returns:
        The exit status; negative when a signal killed the child.

    Raises:
        FileNotFoundError: ``argv[0]`` does not exist.
        PermissionError: ``argv[0]`` may not be executed.
        subprocess.TimeoutExpired: it ran past ``timeout_s``; it and its children were stopped.
    """
    proc = start_logged(argv, log_path, cwd, env)
    if started is not None:
        try:
            started()
        except BaseException:
            _stop(proc)
            raise
    return finish(proc, timeout_s)
