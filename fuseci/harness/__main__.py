"""``python -m fuseci.harness``: the process ncu launches, or the timed run (see the package
docstring)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from contextlib import ExitStack, suppress
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from fuseci.config.model import Suite
from fuseci.config.parse import load_suite
from fuseci.errors import EXIT_SETUP, FuseciError
from fuseci.harness import __doc__ as _DOC
from fuseci.harness import arrays, watch
from fuseci.harness.case_runner import preload, refuse_foreign, run, wait_for_ok_cases, with_code
from fuseci.harness.event_timing import TimingOptions
from fuseci.harness.probe import probe
from fuseci.measure import turn
from fuseci.measure.command import DEFAULT_REPEATS, FOREIGN_TREE_ENV, MAX_PASSES
from fuseci.records.harness import HarnessRecord, write_record

log = logging.getLogger("fuseci.harness")


def time_around(
    suite: Suite, record_path: Path, after: Path, lock: Path | None, only: set[str] | None, timing: TimingOptions
) -> HarnessRecord:
    """The timed pass of ``fuseci run`` (``--after``): time cases while the profiled run (record ``after``) has not
    taken the GPU, then the rest it checked right once that record completes, in turns (:mod:`fuseci.measure.turn`)."""
    ahead = None
    with turn.ahead_of(lock, after) as stop:
        if stop is not None:
            arrays.open_context()
            log.debug("CUDA context ready")
            ahead = run(suite, record_path, only, timing=timing, check=False, stop=stop, first_calls=True)
    if ahead is not None and ahead.complete:
        return ahead
    with ExitStack() as next_turn:
        if lock is not None:
            next_turn.enter_context(turn.claim_next_turn(lock, after, suite.ncu.timeout_s))
        checked = wait_for_ok_cases(after, suite.ncu.timeout_s)
        todo = checked if only is None else checked & only
        if ahead is not None and todo <= set(ahead.cases):  # nothing left to time: the GPU is not needed
            record = replace(ahead, complete=True)
            write_record(record, record_path)
            return record
        with turn.gpu_turn(lock, suite.ncu.timeout_s, claimed=True):
            next_turn.close()  # the GPU is held: the claim has done its work
            arrays.open_context()
            log.debug("CUDA context ready")
            return run(suite, record_path, todo, timing=timing, check=False, prior=ahead)


def _parser() -> argparse.ArgumentParser:
    """The harness's command line (:func:`fuseci.measure.command.harness_argv` builds it)."""
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
    return parser


def _measure(args: argparse.Namespace, timing: TimingOptions | None) -> HarnessRecord:
    """Load the suite, start up, then run it in the GPU's turn (with ``--after``, around the profiled run's)."""
    suite = load_suite(args.suite)
    arrays.runtime()  # fuseci's own device work: CuPy, or PyTorch alone where CuPy is not installed
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
        return time_around(suite, args.record, args.after, args.gpu_lock, only, timing)
    announce = None if args.time else turn.waiting_file(args.record)
    with turn.gpu_turn(args.gpu_lock, suite.ncu.timeout_s, announce=announce):
        arrays.open_context()
        log.debug("CUDA context ready")
        record = run(suite, args.record, only, timing=timing, check=not args.no_checks, passes=args.passes)
    return record if args.time else with_code(record, args.record)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m fuseci.harness``."""
    parser = _parser()
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
        record = _measure(args, timing)
    except FuseciError as exc:
        print(f"fuseci-harness: error: {exc}", file=sys.stderr)
        return EXIT_SETUP
    for c in record.cases.values():
        log.info("%s: %s%s", c.case, c.status.value, f" ({c.message})" if c.message else "")
    return 0


def end(code: int) -> NoReturn:
    """End this process with ``code`` at once, its record written and its output flushed: Python's
    own teardown (``atexit``, every module, the CUDA driver) would delay ``fuseci run``'s critical
    path; ncu has every kernel's results by then. ``atexit`` handlers of kernel modules do not run."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed or broken stream: nothing more can be said there
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    end(main())
