"""``python -m fuseci.harness.trial SUITE --record PATH``: every variant and the reference of a
suite called once on the host (``fuseci check --execute``), before any GPU runner does, on small
inputs (:func:`small_inputs`), their outputs compared with the float64 reference's. The record is
rewritten before and after every call, so the parent can name the call a hang or crash was in."""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import sys
import sysconfig
import traceback
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from fuseci.config.model import UNFUSED, Case, InputSpec, Suite, Variant
from fuseci.config.parse import load_suite
from fuseci.config.resolve import search_path
from fuseci.errors import FuseciError, HarnessError
from fuseci.records.trials import REFERENCE, Outcome, Trial, TrialRecord, write_trials

log = logging.getLogger("fuseci.harness.trial")

#: Elements of a case's largest input once made small (enough for a kernel's blocks and tiles).
SMALL_ELEMENTS = 1 << 16
#: Axes of at most this many elements are kept as they are (kernels take them as block sizes);
#: longer axes are never made shorter than this.
KEPT_AXIS = 16

#: What an exception says when the code needs a GPU: such a call could not run here, it did not fail.
_NEEDS_GPU = re.compile(
    r"\bCUDA\b|\bcuda\b|NVIDIA|libcuda|active drivers|InvalidCxxCompiler|C\+\+ compiler|device-side|\bcupy\b"
)
_QUOTED = 300


def scale(case: Case) -> int:
    """The power of two the case's long axes are divided by: the smallest bringing the largest input to at most
    :data:`SMALL_ELEMENTS` without leaving an axis under :data:`KEPT_AXIS` or dividing one inexactly (ratios kept)."""
    long = _long_axes(case)
    if not long:
        return 1
    f = 1
    while all(d % (2 * f) == 0 and d // (2 * f) >= KEPT_AXIS for d in long):
        if max(math.prod(_divided(spec.shape, f, long)) for spec in case.inputs) <= SMALL_ELEMENTS:
            break
        f *= 2
    return f


def _long_axes(case: Case) -> set[int]:
    """Axes longer than :data:`KEPT_AXIS` that no integer param is told (those are kept)."""
    fixed = {int(p) for p in case.params.values() if isinstance(p, int) and not isinstance(p, bool)}
    return {d for spec in case.inputs for d in spec.shape if d > KEPT_AXIS and d not in fixed}


def _divided(shape: tuple[int, ...], f: int, long: set[int]) -> tuple[int, ...]:
    return tuple(d // f if d in long else d for d in shape)


def small_inputs(case: Case) -> tuple[InputSpec, ...]:
    """The case's inputs, each long axis divided by :func:`scale`: the same rank, dtypes, distributions and seeds."""
    f, long = scale(case), _long_axes(case)
    return tuple(replace(spec, shape=_divided(spec.shape, f, long)) for spec in case.inputs)


_FUSECI = Path(__file__).resolve().parent.parent


def where(exc: BaseException, fn: Callable[..., Any] | None) -> str:
    """The place to look: the innermost frame of the traceback in the suite's own code (not
    fuseci's, Python's or an installed package's), else where the function is defined."""
    paths = sysconfig.get_paths()
    libraries = [Path(paths[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        path = Path(frame.filename).resolve()
        if frame.filename.startswith("<") or any(path.is_relative_to(d) for d in (_FUSECI, *libraries)):
            continue
        return f"{_shown(path)}:{frame.lineno}"
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    return f"{_shown(Path(code.co_filename))}:{code.co_firstlineno}" if code is not None else ""


def _shown(path: Path) -> str:
    """A path relative to the current directory when it is under it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def raised(exc: BaseException, fn: Callable[..., Any] | None) -> tuple[Outcome, str]:
    """What a call raised, as its outcome (code that needs a GPU could not run here) and one line."""
    text = " ".join(str(exc).split())
    text = text if len(text) <= _QUOTED else text[:_QUOTED] + "..."
    at = where(exc, fn)
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    line += f" at {at}" if at else ""
    if _NEEDS_GPU.search(f"{type(exc).__name__} {text}"):
        return Outcome.NOT_RUN, f"it needs a GPU ({line})"
    return Outcome.RAISED, line


class Trials:
    """One suite's record, rewritten at every step."""

    def __init__(self, suite: Suite, path: Path) -> None:
        self.path = path
        self.record = TrialRecord(suite.name, note="runtime cpu")
        write_trials(self.record, path)

    def calling(self, case: Case, function: str) -> None:
        """Say which call is under way (what a crash or hang is then put on)."""
        self.record = replace(self.record, running=f"{case.id}/{function}")
        write_trials(self.record, self.path)

    def add(self, case: Case, function: str, outcome: Outcome, message: str) -> None:
        """One call's end."""
        log.info("case %s: %s: %s %s", case.id, function, outcome.value, message)
        trials = (*self.record.trials, Trial(case.id, function, outcome, message))
        self.record = replace(self.record, trials=trials, running="")
        write_trials(self.record, self.path)

    def finish(self) -> None:
        """Every case tried."""
        self.record = replace(self.record, running="", complete=True)
        write_trials(self.record, self.path)


def trial_case(case: Case, search: list[Path], trials: Trials) -> None:
    """Call every variant of ``case``, and its reference, once on small inputs."""
    from fuseci.harness import arrays, factory
    from fuseci.harness.case_runner import resolve
    from fuseci.harness.correctness import BoundCall, compare_output
    from fuseci.harness.inputs import make_input

    small = replace(case, inputs=small_inputs(case))
    on = "on " + ", ".join(f"{s.name} {list(s.shape)} {s.dtype}" for s in small.inputs)  # x [64, 128] float32, ...
    models = factory.Models(small, lambda ref: resolve(ref, search))

    def bound(v: Variant) -> BoundCall | tuple[Outcome, str]:
        if v.framework == "cupy":
            return Outcome.NOT_RUN, "it takes CuPy arrays, which need a GPU; `fuseci run` calls it there"
        try:
            if v.factory is not None:
                return models.call(v)
            return BoundCall(resolve(v.fn, search), arrays.get(v.framework), case.params, f"variant {v.id!r} ({v.fn})")
        except Exception as exc:  # an import that raises, a factory that fails: its error, not fuseci's
            return raised(exc, None)

    try:
        inputs = {spec.name: make_input(spec) for spec in small.inputs}
    except FuseciError as exc:
        for v in case.variants:
            trials.add(case, v.id, Outcome.NOT_RUN, f"its inputs cannot be made here: {exc}")
        return
    expected, against = _reference(case, small, search, models, inputs, trials, on)
    outs_by_variant: dict[str, tuple[Any, ...]] = {}
    for v in case.variants:
        call = bound(v)
        if isinstance(call, tuple):
            trials.add(case, v.id, *call)
            continue
        trials.calling(case, v.id)
        try:
            outs = tuple(arrays.own_copy(o) for o in call(inputs))
        except HarnessError as exc:  # it returned something that is not an array
            trials.add(case, v.id, Outcome.RAISED, f"{exc} {on}")
            continue
        except Exception as exc:  # a user's function may raise anything: its outcome, said in one line
            outcome, message = raised(exc, call.fn)
            trials.add(case, v.id, outcome, f"{message} {on}" if outcome is Outcome.RAISED else message)
            continue
        outs_by_variant[v.id] = outs
        target, name = (expected, against) if expected is not None else (outs_by_variant.get(UNFUSED), UNFUSED)
        if target is None or target is outs:
            trials.add(case, v.id, Outcome.MATCHED, "ran; nothing to compare it with (no float64 reference ran)")
            continue
        trials.add(case, v.id, *_compared(case, v.id, outs, target, name, compare_output, on))


def _compared(
    case: Case, variant: str, outs: tuple[Any, ...], expected: tuple[Any, ...], against: str, compare: Any, on: str
) -> tuple[Outcome, str]:
    """A variant's outputs against the reference's (or ``unfused``'s)."""
    if len(outs) != len(expected):
        return Outcome.WRONG, f"returned {len(outs)} outputs, {against} {len(expected)} {on}"
    worst = 0.0
    for i, (o, e) in enumerate(zip(outs, expected, strict=True)):
        try:
            check = compare(o, e, case.correctness, variant=variant, against=against, index=i)
        except HarnessError as exc:  # shapes differ
            return Outcome.WRONG, f"{exc} {on}"
        if not check.passed:
            return Outcome.WRONG, f"{check.describe()} {on}"
        worst = max(worst, check.max_abs_err)
    return Outcome.MATCHED, f"matched {against} (max abs err {worst:.3g})"


def _reference(
    case: Case, small: Case, search: list[Path], models: Any, inputs: Mapping[str, Any], trials: Trials, on: str
) -> tuple[tuple[Any, ...] | None, str]:
    """The float64 outputs every variant is compared with, and what they are called; None when
    the reference could not run (said in the record when the case names it)."""
    from fuseci.harness import arrays
    from fuseci.harness.case_runner import resolve
    from fuseci.harness.correctness import BoundCall, reference_outputs

    named = bool(case.reference)
    what = "the reference"
    try:
        if case.reference:
            ref: BoundCall | None = BoundCall(
                resolve(case.reference, search), arrays.get(case.framework), case.params, f"reference {case.reference}"
            )
        else:
            ref, what = models.reference(), "the float64 copy of the model"
        unfused = next((v for v in case.variants if v.id == UNFUSED), None)
        if ref is None and unfused is not None and unfused.framework != "cupy":
            fn = resolve(unfused.fn, search)
            # no reference named: unfused computing in float64 is one (integer inputs kept, as indices)
            ref = BoundCall(fn, arrays.get(unfused.framework), case.params, "unfused on float64 inputs", model=True)
            what = "unfused in float64"
    except Exception as exc:  # an import that raises, a factory that fails
        if named:
            trials.add(case, REFERENCE, *raised(exc, None))
        return None, ""
    if ref is None:
        return None, ""
    if named:
        trials.calling(case, REFERENCE)
    try:
        expected = tuple(arrays.own_copy(o) for o in reference_outputs(small, ref, inputs))
    except Exception as exc:  # the reference's own error
        outcome, message = raised(exc, ref.fn)
        if named:
            trials.add(case, REFERENCE, outcome, f"{message} {on}" if outcome is Outcome.RAISED else message)
        else:
            log.info("case %s: %s raised (%s); variants are compared with unfused as it runs", case.id, what, message)
        return None, ""
    if named:
        trials.add(case, REFERENCE, Outcome.MATCHED, "computed the float64 outputs the variants are compared with")
    return expected, what


def run_trials(suite: Suite, record: Path) -> TrialRecord:
    """Call every function of ``suite`` once, the record rewritten as it goes."""
    from fuseci.harness import arrays
    from fuseci.harness.case_runner import _put_on_path

    trials = Trials(suite, record)
    search = search_path(suite)
    _put_on_path(search)
    try:
        arrays.runtime()
    except HarnessError as exc:
        for case in suite.cases:
            for v in case.variants:
                trials.add(case, v.id, Outcome.NOT_RUN, str(exc))
        trials.finish()
        return trials.record
    for case in suite.cases:
        trial_case(case, search, trials)
        for framework in {arrays.get(f) for f in case.frameworks}:
            framework.free()
    trials.finish()
    return trials.record


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m fuseci.harness.trial``."""
    parser = argparse.ArgumentParser(prog="python -m fuseci.harness.trial", description=__doc__.splitlines()[0])
    parser.add_argument("suite", type=Path)
    parser.add_argument("--record", type=Path, required=True, help="where to write the trial record (JSON)")
    args = parser.parse_args(argv)
    os.environ["FUSECI_RUNTIME"] = "cpu"
    os.environ["TRITON_INTERPRET"] = "1"  # read when a module's @triton.jit runs: before any is imported
    logging.basicConfig(
        level=os.environ.get("FUSECI_LOG", "INFO"), format="fuseci-trial: %(message)s", stream=sys.stderr
    )
    try:
        run_trials(load_suite(args.suite), args.record)
    except FuseciError as exc:
        print(f"fuseci-trial: error: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
