"""The GPU's turn: how fuseci's processes take turns on one GPU, in one place.

Every harness process that uses a GPU holds that GPU's lock file while it does; the timed pass
of ``fuseci run`` may use the GPU ahead of its profiled run while nobody else does, and claims
the turn right after it. Both the harness processes and their parent import this module.

File signals (all plain files; a lock file is held by ``flock``, which the kernel releases when
its holder ends, however it ends)
============================  ==========================  ===========================================
file                          created / held by           removed by, and what it says
============================  ==========================  ===========================================
``fuseci-gpu-<gpu>.lock``     any harness process using   its holder on release. Held: the GPU is
(:func:`lock_path`, in the    the GPU (:func:`gpu_turn`,  in use. Shared by every fuseci process on
temporary directory)          :func:`gpu_if_free`)        the machine (two CI jobs on one runner).
``<lock>.next``               a timed pass, from the      the timed pass, once it holds the GPU.
(:func:`next_turn_file`)      moment its profiled run's   Held: the next turn is claimed; only the
                              record appears              claimant takes the GPU when it is free
                              (:func:`claim_next_turn`)   (a file left unheld claims nothing).
``<record>.waiting``          a profiled run while it     the profiled run once it holds the GPU or
(:func:`waiting_file`)        waits for the GPU           gives up; a stale one by the parent before
                              (:func:`gpu_turn`'s         the run (:func:`fuseci.measure.profile.remove_stale`).
                              ``announce``)               Present: the timed pass ahead hands over.
``<suite>.harness.json``      the profiled run, once it   the parent, before the run (with the
(the profiled record)         holds the GPU               stale ``.waiting``). Present: the
                                                          profiled run has had the GPU; complete: it
                                                          is over, and says the cases to time.
``<suite>.timing.json``       the timed pass, rewritten   the parent, before the timed process
(the timed record)            as each case starts         starts. Its ``running`` names the case in
                                                          hand: :class:`AheadWatch` reads it.
============================  ==========================  ===========================================

States of one GPU, and who moves it on
--------------------------------------
1. **free**: nobody holds the lock. A process that waits takes it within :data:`GPU_POLL_S`,
   unless the next turn is claimed (state 4) and it is not the claimant.
2. **held by a profiled run** (or a timed pass after its profiled run, ``fuseci bench``, a
   re-measurement): the others wait in :func:`gpu_turn`. A profiled run that waits keeps
   ``<record>.waiting`` meanwhile.
3. **held by a timed pass ahead** of its profiled run (:func:`ahead_of`): the timed process
   starts outside ncu and is ready first; when its profiled record does not exist yet, nobody
   waits for it, nobody claimed the next turn and the lock is free at once, it takes the GPU
   and times cases one at a time, asking before each whether ``<record>.waiting`` exists;
   when it does, it finishes the case in hand and gives the GPU back (→ 1, the profiled run
   takes it → 2). If it keeps the GPU for one case longer than :func:`ahead_limit_s` while the
   profiled run waits, the parent's :class:`AheadWatch` stops it (→ 1) and a fresh timed
   process times the cases after the profiled run.
4. **next turn claimed**: once the profiled record appears (the profiled run holds the GPU),
   the timed pass holds ``<lock>.next`` (:func:`claim_next_turn`); when the profiled run gives
   the GPU back, only the claimant takes it (→ 2, as the timed pass after its profiled run),
   then lets the claim go. No other suite's process slips in between: the suite is judged
   while the next suite uses the GPU. A timed pass with nothing left to time (every case was
   timed ahead, or the rest checked wrong) lets the claim go without taking the GPU (→ 1).

The switch ``FUSECI_TIMED_AHEAD=0`` (:data:`AHEAD_SWITCH`) keeps every timed pass out of state
3: it times its cases after its profiled run only.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

from fuseci.config.model import Suite
from fuseci.errors import HarnessError, ReportError
from fuseci.files.locks import LockTimeout, file_lock, is_held
from fuseci.measure import process
from fuseci.records.harness import read_record

#: The harness's own log: the turn's steps are lines of the harness process that takes them.
log = logging.getLogger("fuseci.harness")
#: The parent's log, where :class:`AheadWatch` says what it stopped.
parent_log = logging.getLogger(__name__)

#: How often a process waiting for the GPU tries its lock: the GPU is handed on within this.
GPU_POLL_S = 0.01

#: Set to ``0``, keeps the timed pass from timing cases ahead of its profiled run (state 3).
AHEAD_SWITCH = "FUSECI_TIMED_AHEAD"


def lock_path(device: str | None) -> Path:
    """The lock file of one GPU, shared by every fuseci process on this machine (two CI jobs on one runner)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    name = device if device is not None else (visible.replace(",", "_") or "all")
    safe = re.sub(r"[^0-9A-Za-z_-]", "_", name)[:64]
    return Path(tempfile.gettempdir()) / f"fuseci-gpu-{safe}.lock"


def next_turn_file(lock: Path) -> Path:
    """The file whose holder has the next turn on the GPU of ``lock``, before anyone waiting."""
    return lock.with_name(lock.name + ".next")


def waiting_file(record: Path) -> Path:
    """The file a profiled run keeps beside its ``record`` while it waits for the GPU (state 3 hands over)."""
    return record.with_name(record.name + ".waiting")


@contextmanager
def gpu_turn(
    lock: Path | None, timeout_s: float, *, claimed: bool = False, announce: Path | None = None
) -> Iterator[None]:
    """Hold the GPU's lock file (when given) for the block; only a ``claimed`` holder takes a claimed next turn.
    With ``announce`` (a profiled run: :func:`waiting_file` of its record) that file exists while it waits.

    Raises:
        HarnessError: another fuseci process held the GPU for ``timeout_s``.
    """
    if lock is None:
        yield
        return
    log.info("waiting for the GPU (%s)", lock)
    claim = next_turn_file(lock)
    with ExitStack() as held:
        if announce is not None:
            announce.touch()
            held.callback(announce.unlink, missing_ok=True)
        try:  # only taking the lock is the lock's failure; what the block raises passes through
            held.enter_context(
                file_lock(
                    lock,
                    timeout_s,
                    poll_s=GPU_POLL_S,
                    max_poll_s=GPU_POLL_S,
                    may_try=None if claimed else lambda: not is_held(claim),
                )
            )
        except LockTimeout as exc:
            holder = exc.holder if not is_held(claim) else f"the timed pass that claimed the next turn, {claim}"
            raise HarnessError(
                f"the GPU stayed busy for {exc.waited_s:.1f} s (held by {holder}); lock {lock}"
            ) from None
        except OSError as exc:
            raise HarnessError(
                f"cannot take the GPU's lock {lock}: {exc.strerror or exc}; another user's fuseci may own it: "
                "set TMPDIR to a directory of your own"
            ) from None
        log.info("GPU taken")
        if announce is not None:
            announce.unlink(missing_ok=True)
        yield
    log.debug("GPU given back")


@contextmanager
def claim_next_turn(lock: Path, record: Path, timeout_s: float) -> Iterator[None]:
    """Hold the next turn on the GPU of ``lock`` for the block (state 4), from when the profiled run's
    ``record`` appears (it then holds the GPU); release it once the GPU is held (:func:`gpu_turn`).

    Raises:
        HarnessError: the record did not appear, or the claim was not had, within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while not record.exists():
        if time.monotonic() > deadline:
            raise HarnessError(f"{record}: the profiled run wrote no record within {timeout_s:g} s")
        time.sleep(GPU_POLL_S)
    try:
        with file_lock(next_turn_file(lock), max(deadline - time.monotonic(), 0.0), GPU_POLL_S, GPU_POLL_S):
            log.debug("next turn on the GPU claimed")
            yield
    except LockTimeout as exc:
        raise HarnessError(
            f"the next turn on the GPU stayed claimed for {exc.waited_s:.1f} s (by {exc.holder})"
        ) from None
    except OSError as exc:
        raise HarnessError(
            f"cannot claim the next turn on the GPU ({next_turn_file(lock)}): {exc.strerror or exc}"
        ) from None


@contextmanager
def gpu_if_free(lock: Path) -> Iterator[bool]:
    """Hold the GPU for the block if nobody holds it or claimed the next turn; whether it is held (no waiting)."""
    if is_held(next_turn_file(lock)):
        yield False
        return
    with ExitStack() as held:
        taken = False
        with suppress(LockTimeout, OSError):
            held.enter_context(file_lock(lock, 0.0, poll_s=GPU_POLL_S, max_poll_s=GPU_POLL_S))
            taken = True
            log.info("GPU taken ahead of the profiled run")
        yield taken
    if taken:
        log.debug("GPU given back")


@contextmanager
def ahead_of(lock: Path | None, record: Path) -> Iterator[Callable[[], bool] | None]:
    """Hold the GPU for the block ahead of the profiled run of ``record`` (state 3) when it may be. The block
    gets what to ask before each case, whether to hand the GPU over; None when not held (no waiting)."""
    waiting = waiting_file(record)
    if lock is None or os.environ.get(AHEAD_SWITCH) == "0" or record.exists() or waiting.exists():
        yield None
        return
    with gpu_if_free(lock) as held:
        yield waiting.exists if held else None


def ahead_limit_s(suite: Suite) -> float:
    """How long one case timed ahead may keep the GPU while the profiled run waits (:class:`AheadWatch`):
    a quarter of ``ncu.timeout``, at least 30 s (a cold ``torch.compile`` with autotuning takes that long)."""
    return max(30.0, suite.ncu.timeout_s / 4)


class AheadWatch:
    """Stops a timed pass that keeps the GPU for one case over ``limit_s`` ahead of its waiting profiled run
    (a hang, say); a fresh process then times the cases after it (:attr:`stopped`)."""

    POLL_S = 0.25

    def __init__(self, timer: subprocess.Popen[bytes], record: Path, waiting: Path, limit_s: float) -> None:
        self.stopped = False
        """Whether the timed process was stopped."""
        self._timer, self._record, self._waiting, self._limit_s = timer, record, waiting, limit_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="fuseci-ahead-watch", daemon=True)
        self._thread.start()

    def _stuck(self) -> bool:
        if not self._waiting.exists():
            return False
        try:
            age = time.time() - self._record.stat().st_mtime
            running = read_record(self._record).running if age > self._limit_s else None
        except (OSError, ReportError):
            return False
        return running is not None

    def _watch(self) -> None:
        while not self._done.wait(self.POLL_S):
            if self._timer.poll() is not None:
                return
            if self._stuck():
                parent_log.warning(
                    "the timed pass kept the GPU for over %g s in one case ahead of the profiled run, which waits: "
                    "stopped; it times the cases after the profiled run instead",
                    self._limit_s,
                )
                self.stopped = True
                process.stop(self._timer)
                return

    def close(self) -> None:
        """Stop watching."""
        self._done.set()
        self._thread.join()
