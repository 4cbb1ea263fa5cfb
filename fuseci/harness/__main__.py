"""``python -m fuseci.harness``: the process ncu launches, or the timed run (see the package
docstring)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from fuseci.config.model import Suite
from fuseci.config.parse import load_suite
from fuseci.errors import EXIT_SETUP, FuseciError, HarnessError
from fuseci.harness import __doc__ as _DOC
from fuseci.harness import arrays, watch
from fuseci.harness.probe import probe
from fuseci.harness.run import preload, refuse_foreign, run, wait_for_ok_cases
from fuseci.harness.timing import TimingOptions
from fuseci.measure.command import DEFAULT_REPEATS, FOREIGN_TREE_ENV, MAX_PASSES, waiting_file
from fuseci.measure.record import HarnessRecord, write_record
from fuseci.store.locks import LockTimeout, file_lock, is_held

log = logging.getLogger("fuseci.harness")

#: How often a process waiting for the GPU tries its lock: the GPU is handed on within this,
#: which, between the ten or so turns of a run, adds up (a try, which opens the lock file and
#: closes it again, costs about 0.1 ms).
GPU_POLL_S = 0.01


def next_turn_file(lock: Path) -> Path:
    """The file whose holder has the next turn on the GPU of ``lock``, before anyone waiting."""
    return lock.with_name(lock.name + ".next")


@contextmanager
def gpu_turn(
    lock: Path | None, timeout_s: float, *, claimed: bool = False, announce: Path | None = None
) -> Iterator[None]:
    """Hold the GPU's lock file (when given) for the block.

    A process that holds the next turn (``claimed``, see :func:`claim_next_turn`) takes the GPU
    as soon as it is free; any other waits while someone holds the next turn. With ``announce``
    (a profiled run: :func:`fuseci.measure.command.waiting_file` of its record) that file says,
    while it waits, that it does: its timed pass, timing cases ahead of it on a GPU nobody used
    (:func:`time_around`), hands the GPU over after the case in hand.

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
    """Hold the next turn on the GPU of ``lock`` for the block, from the moment the profiled run
    whose ``record`` this process (the timed pass) waits for holds the GPU: its record appears
    only then. So the timed pass follows its profiled run at once, no other suite's process
    slipping in between; the suite is then judged, and the next suite starts while the one in
    flight beside it uses the GPU, instead of both ending together and the GPU waiting for the
    start of the next two. Release it once the GPU is held (:func:`gpu_turn` with ``claimed``).

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
    """Hold the GPU for the block if nobody holds it or has claimed the next turn right now;
    whether it is held (the block runs either way, without waiting)."""
    if is_held(next_turn_file(lock)):
        yield False
        return
    with ExitStack() as held:
        try:
            held.enter_context(file_lock(lock, 0.0, poll_s=GPU_POLL_S, max_poll_s=GPU_POLL_S))
            taken = True
        except (LockTimeout, OSError):
            taken = False
        if taken:
            log.info("GPU taken ahead of the profiled run")
        yield taken
    if taken:
        log.debug("GPU given back")


def time_around(
    suite: Suite, record_path: Path, after: Path, lock: Path | None, only: set[str] | None, timing: TimingOptions
) -> HarnessRecord:
    """The timed pass of ``fuseci run`` (``--after``): time the cases around the profiled run
    whose record is ``after``.

    The profiled process starts under ncu and imports under its injection, so this one is ready
    first: while the GPU is free and the profiled run has not taken it, it times cases, one at a
    time (their first calls timed too: they pay the cold start now), until the profiled run waits
    for the GPU (:func:`gpu_turn`'s ``announce``), then hands the GPU over. Once the profiled record is
    complete it times the rest of the cases that checked right, taking the GPU next
    (:func:`claim_next_turn`). The case in hand is finished first: a profiled run that comes for
    the GPU meanwhile waits for at most that case (for a one-case PyTorch suite on an H200 the
    timed process was ready 0.3-1.2 s before the profiled one and its case took about 1 s, so
    the profiled run waited 0-1 s), never longer than timing the case after it would take.
    """
    ahead = None
    waiting = waiting_file(after)
    if lock is not None and os.environ.get("FUSECI_TIMED_AHEAD") != "0" and not after.exists() and not waiting.exists():
        with gpu_if_free(lock) as held:
            if held:
                arrays.open_context()
                log.debug("CUDA context ready")
                ahead = run(suite, record_path, only, timing=timing, check=False, stop=waiting.exists, first_calls=True)
    if ahead is not None and ahead.complete:
        return ahead
    with ExitStack() as next_turn:
        if lock is not None:
            next_turn.enter_context(claim_next_turn(lock, after, suite.ncu.timeout_s))
        checked = wait_for_ok_cases(after, suite.ncu.timeout_s)
        todo = checked if only is None else checked & only
        if ahead is not None and todo <= set(ahead.cases):  # nothing left to time: the GPU is not needed
            record = replace(ahead, complete=True)
            write_record(record, record_path)
            return record
        with gpu_turn(lock, suite.ncu.timeout_s, claimed=True):
            next_turn.close()  # the GPU is held: the claim has done its work
            arrays.open_context()
            log.debug("CUDA context ready")
            return run(suite, record_path, todo, timing=timing, check=False, prior=ahead)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m fuseci.harness``."""
    parser = argparse.ArgumentParser(prog="python -m fuseci.harness", description=(_DOC or "").strip().splitlines()[0])
    parser.add_argument("suite", type=Path, nargs="?")
    parser.add_argument("--record", type=Path, required=True, help="where to write the harness record (JSON)")
    parser.add_argument(
        "--probe", action="store_true", help="instead of a suite, run one tiny kernel to check CuPy and the GPU"
    )
    parser.add_argument("--case", action="append", help="run only this case (repeatable)")
    parser.add_argument(
        "--time", action="store_true", help="time every variant with CUDA events instead of NVTX ranges (no ncu)"
    )
    parser.add_argument("--repeats", type=int, help=f"with --time: timed calls per variant (default {DEFAULT_REPEATS})")
    parser.add_argument(
        "--passes",
        type=int,
        default=1,
        help="without --time: run each variant this many times, each in its own NVTX range, for ncu to profile "
        "(a baseline learns which counters repeat)",
    )
    parser.add_argument(
        "--no-checks",
        action="store_true",
        help="with --time: skip the correctness checks (the timed pass of `fuseci run`, whose profiled pass checked)",
    )
    parser.add_argument(
        "--after",
        type=Path,
        metavar="RECORD",
        help="with --time: the timed pass of the profiled run whose record is RECORD: time cases while the GPU is free "
        "and that run has not taken it, then, once RECORD is complete, the rest of the cases it checked right",
    )
    parser.add_argument(
        "--gpu-lock",
        type=Path,
        metavar="FILE",
        help="hold an exclusive lock on FILE while using the GPU, so that fuseci's processes take turns on it",
    )
    args = parser.parse_args(argv)
    if args.probe:
        if args.suite is not None or args.case or args.time or args.repeats is not None or args.no_checks:
            parser.error("--probe takes no suite, --case, --time or --repeats")
        return probe(args.record)
    if args.suite is None:
        parser.error("a suite file is required (or --probe)")
    if (args.repeats is not None or args.no_checks or args.after) and not args.time:
        parser.error("--repeats, --no-checks and --after need --time")
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats must be positive, got {args.repeats}")
    if not 1 <= args.passes <= MAX_PASSES or (args.passes != 1 and args.time):
        parser.error(f"--passes takes 1 to {MAX_PASSES}, without --time; got {args.passes}")
    timing = None
    if args.time:
        timing = TimingOptions() if args.repeats is None else TimingOptions(repeats=args.repeats)
    logging.basicConfig(
        level=os.environ.get("FUSECI_LOG", "INFO"),
        format="fuseci-harness: %(relativeCreated)7.0f ms %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("filelock").setLevel(logging.INFO)  # its DEBUG lines come at every try for the GPU
    log.debug("clock: %.3f s since the epoch", time.time())  # lines up the logs of one run's processes
    try:
        suite = load_suite(args.suite)
        arrays.cupy()  # fuseci's own device work needs CuPy whatever the suite's functions take
        if not args.time:  # fuseci ab: what each case's checked calls run and read, for its audit
            watch.start_if_asked(args.record.resolve().parent)
        preload(suite)
        if os.environ.get(FOREIGN_TREE_ENV):  # fuseci ab: this side's modules, never the other's
            refuse_foreign(Path(os.environ[FOREIGN_TREE_ENV]), Path.cwd())
        arrays.start_driver()  # before the GPU's turn, while another process may be measuring: no context yet
        log.debug("CUDA driver ready")
        only = set(args.case) if args.case else None
        if args.after is not None:
            assert timing is not None  # --after needs --time
            record = time_around(suite, args.record, args.after, args.gpu_lock, only, timing)
        else:
            announce = None if args.time else waiting_file(args.record)
            with gpu_turn(args.gpu_lock, suite.ncu.timeout_s, announce=announce):
                arrays.open_context()
                log.debug("CUDA context ready")
                record = run(suite, args.record, only, timing=timing, check=not args.no_checks, passes=args.passes)
    except FuseciError as exc:
        print(f"fuseci-harness: error: {exc}", file=sys.stderr)
        return EXIT_SETUP
    for c in record.cases.values():
        log.info("%s: %s%s", c.case, c.status.value, f" ({c.message})" if c.message else "")
    return 0


def end(code: int) -> NoReturn:
    """End this process with ``code`` at once, its record written and its output flushed.

    Python's own ending (its ``atexit`` handlers, the teardown of every module and object, then
    the CUDA driver's) took 1.1-1.2 s in a process that had run a ``torch.compile`` function on an
    H200, against 0.1 s for this: both harness processes of a PyTorch suite end on the critical
    path of ``fuseci run`` (the profiled one before ncu writes its report, the timed one before
    the suite is judged). ncu has every kernel's results by then: it collects them as each
    kernel is profiled. What a kernel module registers with ``atexit`` does not run.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed or broken stream: nothing more can be said there
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    end(main())
