"""Running a suite inside the harness process: each case checked, then measured in its NVTX
ranges (under ncu) or timed with CUDA events, the record rewritten after every case."""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from fuseci.config import names
from fuseci.config.model import Case, Suite
from fuseci.config.resolve import search_path
from fuseci.errors import FuseciError, HarnessError
from fuseci.harness import arrays, cubins, factory, in_process, watch
from fuseci.harness.arrays import best_configs, inductor, launch_ranges
from fuseci.harness.correctness import BoundCall, check_case, first_calls_of
from fuseci.harness.env import collect_env
from fuseci.harness.event_timing import TimingOptions, copy_bandwidth, time_case
from fuseci.harness.inputs import make_input
from fuseci.measure import autotune as kept
from fuseci.measure import disassembly
from fuseci.records.fusion import Provenance, Repeat
from fuseci.records.harness import CaseRecord, CaseStatus, CheckRecord, HarnessRecord, read_record, write_record

log = logging.getLogger("fuseci.harness")


def resolve(ref: str, search: list[Path]) -> Callable[..., Any]:
    """Import ``module:function``.

    Raises:
        HarnessError: the module or function does not exist; says where it looked.
    """
    module_name, func_name = ref.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        where = ", ".join(str(p) for p in search)
        raise HarnessError(
            f"cannot import module {module_name!r} for {ref!r} ({exc}); searched the installed packages and {where}"
        ) from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise HarnessError(f"module {module_name!r} ({getattr(module, '__file__', '?')}) has no function {func_name!r}")
    return func


def _calls(case: Case, search: list[Path]) -> tuple[dict[str, BoundCall], BoundCall | None]:
    """Each variant, and the reference, bound to its framework (a factory's to its module)."""
    models = factory.Models(case, lambda ref: resolve(ref, search))  # a factory's module, once per case
    calls = {
        v.id: models.call(v)
        if v.factory is not None
        else BoundCall(resolve(v.fn, search), arrays.get(v.framework), case.params, f"variant {v.id!r} ({v.fn})")
        for v in case.variants
    }
    reference = (
        BoundCall(
            resolve(case.reference, search), arrays.get(case.framework), case.params, f"reference {case.reference}"
        )
        if case.reference
        else models.reference()
    )
    return calls, reference


def _measure(
    suite: Suite, case: Case, calls: dict[str, BoundCall], inputs: dict[str, arrays.Tensor], passes: int = 1
) -> tuple[dict[str, tuple[str, ...]], dict[str, dict[str, tuple[Repeat, ...]]]]:
    """Warm every variant up, then run each inside its NVTX range ``passes`` times over: what each
    compiled there, and each ``repeats: once`` ledger variant's launches ncu left out, by pass."""
    handed = {v.id: calls[v.id].handed(inputs) for v in case.variants}
    for v in case.variants:  # warm-up, outside every range
        calls[v.id].raw(handed[v.id])
    arrays.synchronize()
    log.debug("case %s: warmed up", case.id)
    compiled: dict[str, tuple[str, ...]] = {}
    repeated: dict[str, dict[str, tuple[Repeat, ...]]] = {}
    probe = in_process.get()
    for again in range(passes):
        for v in case.variants:
            call = calls[v.id]
            ops = inductor.op_ranges() if v.ledger is not None else contextlib.nullcontext()
            once = v.ledger is not None and v.ledger.repeats == "once" and probe is None
            marks = launch_ranges.once_per_configuration() if once else contextlib.nullcontext(None)
            range_name = names.range_name(suite.name, case.id, v.id, again)
            rerun = functools.partial(call.raw, handed[v.id])
            if probe is not None:
                probe.plain(range_name, rerun)
            window = probe.window(range_name, rerun) if probe is not None else contextlib.nullcontext()
            with arrays.watch_compiles() as seen, arrays.nvtx_range(range_name):
                with window, ops, marks as launches:  # a ledger variant: each kernel inside its wrapper call's range
                    call.raw(handed[v.id])
                arrays.synchronize()
            if launches is not None:
                repeated.setdefault(v.id, {})[str(again)] = tuple(launches.repeats)
            if seen:
                compiled[v.id] = tuple(dict.fromkeys([*compiled.get(v.id, ()), *seen]))
                log.warning("case %s: %s compiled inside its measured range: %s", case.id, v.id, "; ".join(seen))
    log.debug("case %s: measured", case.id)
    return compiled, repeated


def run_case(
    suite: Suite,
    case: Case,
    search: list[Path],
    timing: TimingOptions | None = None,
    *,
    check: bool = True,
    first_calls: bool = False,
    passes: int = 1,
) -> CaseRecord:
    """Check, warm up and measure one case, or time it with ``timing`` (see :func:`run`); whatever
    it raises becomes an error record."""
    frameworks = {arrays.get(f) for f in case.frameworks} | {arrays.get(arrays.runtime_name())}
    try:
        return _case_record(suite, case, search, timing, check=check, first_calls=first_calls, passes=passes)
    except FuseciError as exc:
        return CaseRecord(case.id, CaseStatus.ERROR, str(exc))
    except Exception as exc:  # a user's kernel may raise anything; the other cases still run
        log.error("case %s failed:\n%s", case.id, traceback.format_exc())  # all of it, in the harness log
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        return CaseRecord(case.id, CaseStatus.ERROR, f"{type(exc).__name__}: {first_lines(str(exc))}{where}")
    finally:
        try:
            for framework in frameworks:
                framework.free()
        except Exception:  # a lost CUDA context cannot free; run() notices and stops
            log.warning("case %s: could not free device memory", case.id)


def _case_record(
    suite: Suite,
    case: Case,
    search: list[Path],
    timing: TimingOptions | None,
    *,
    check: bool,
    first_calls: bool,
    passes: int,
) -> CaseRecord:
    calls, reference = _calls(case, search)
    inputs = {spec.name: make_input(spec) for spec in case.inputs}
    log.debug("case %s: inputs made", case.id)
    checks: list[CheckRecord] = []
    provenance: dict[str, Provenance] = {}
    min_bytes = None
    first_calls_ns: dict[str, float] = {}
    autotuned: dict[str, tuple[str, ...]] = {}
    notes: list[str] = []
    if check or timing is None:
        with watch.checking(case.id, {ref.split(":")[0] for ref in case.functions}):
            found = check_case(case, calls, reference, inputs)
        checks, min_bytes, notes, provenance = found.checks, found.min_bytes, found.notes, found.provenance
        first_calls_ns, autotuned = found.first_call_ns, found.autotuned
        log.debug("case %s: checked", case.id)
    if case.min_bytes is not None:
        min_bytes = case.min_bytes
    failed = [k for k in checks if not k.passed]
    if failed:
        worst = max(failed, key=lambda k: k.max_abs_err)
        return CaseRecord(
            case.id,
            CaseStatus.WRONG,
            f"wrong result: {worst.describe()}",
            tuple(checks),
            min_bytes=min_bytes,
            first_call_ns=first_calls_ns,
            notes=tuple(notes),
        )
    if timing is not None:
        if first_calls and not first_calls_ns:  # not timed by the checks
            first_calls_ns, autotuned = first_calls_of(case, calls, inputs)
        timings = time_case(case, calls, inputs, timing)
        log.debug("case %s: timed", case.id)
        return CaseRecord(
            case.id,
            CaseStatus.OK,
            "",
            tuple(checks),
            timings=timings,
            min_bytes=min_bytes,
            first_call_ns=first_calls_ns,
            autotuned=autotuned,
        )
    compiled, repeated = _measure(suite, case, calls, inputs, passes)
    for vid, by_pass in repeated.items():
        provenance[vid] = replace(provenance.get(vid, Provenance()), repeats=by_pass)
    return CaseRecord(
        case.id,
        CaseStatus.OK,
        "",
        tuple(checks),
        tuple(v.id for v in case.variants),
        min_bytes=min_bytes,
        first_call_ns=first_calls_ns,
        autotuned=autotuned,
        compiled=compiled,
        notes=tuple(notes),
        provenance=provenance,
    )


def first_lines(text: str, lines: int = 3, chars: int = 400) -> str:
    """The head of a long message (a compiler's log, say); the whole text goes to the log."""
    kept = text.strip().splitlines()[:lines]
    head = " | ".join(line.strip() for line in kept)
    if len(head) > chars:
        head = head[:chars] + "..."
    return head + (" ... (full text in the harness log)" if len(text.strip().splitlines()) > lines else "")


def _put_on_path(search: list[Path]) -> None:
    """Put the suite's module directories at the front of ``sys.path``, in order, each once."""
    for p in reversed(search):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))


#: Modules that CuPy and NumPy import on first use (CuPy's first ufunc, NumPy's first percentile),
#: which :func:`preload` imports before the GPU's turn.
LAZY_IMPORTS = ("cupyx", "cupyx.scipy.special", "numpy.ma")


def preload(suite: Suite) -> None:
    """Import every module the suite names, and :data:`LAZY_IMPORTS`, before the GPU's turn; a
    module that fails to import is left for its case to report."""
    _put_on_path(search_path(suite))
    for module in LAZY_IMPORTS:
        try:
            importlib.import_module(module)
        except ImportError:  # optional parts: whoever needs one says so
            log.debug("%s is not installed", module)
    for name in suite.frameworks:  # `import torch` takes seconds: while another process measures
        started = time.perf_counter()
        try:
            arrays.get(name).load()
        except FuseciError as exc:  # reported by each case that needs it
            log.info("framework %s: %s", name, exc)
        log.debug("framework %s loaded in %.2f s", name, time.perf_counter() - started)
    for module in sorted({ref.split(":")[0] for c in suite.cases for ref in c.functions}):
        started = time.perf_counter()
        try:
            with watch.importing(module):
                importlib.import_module(module)
        except Exception as exc:  # reported by the case that needs it, with where it looked
            log.info("preloading %s failed (%s: %s); its cases will say why", module, type(exc).__name__, exc)
        log.debug("module %s imported in %.2f s", module, time.perf_counter() - started)
    arrays.warm_compiler_keys()  # the compilers those modules brought, while the GPU is prepared


#: fuseci's own package: the same for both sides of ``fuseci ab`` wherever it is installed.
_FUSECI = Path(__file__).resolve().parent.parent


def foreign_modules(tree: Path, own: Path) -> list[str]:
    """Modules imported from files inside ``tree`` (``fuseci ab``'s other side) but not ``own`` or fuseci's package,
    as ``name (file)``; fuseci's own are told by file, not name (``__main__``, ``__mp_main__`` registered too)."""
    tree, own = tree.resolve(), own.resolve()
    found = []
    for name, module in sorted(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file:
            continue
        path = Path(file).resolve()
        if path.is_relative_to(tree) and not path.is_relative_to(own) and not path.is_relative_to(_FUSECI):
            found.append(f"{name} ({path})")
    return found


def refuse_foreign(tree: Path, own: Path) -> None:
    """Stop when :func:`foreign_modules` finds any.

    Raises:
        HarnessError: a module came from ``tree``; says which and from where.
    """
    found = foreign_modules(tree, own)
    if found:
        raise HarnessError(
            f"imported {', '.join(found[:5])}{' ...' if len(found) > 5 else ''} from the other side's tree {tree}, "
            f"not from this side's {own}: its measurement would be of the other side's code; remove that tree "
            "from PYTHONPATH, and give this side every module its suite names"
        )


def wait_for_ok_cases(record_path: Path, timeout_s: float, poll_s: float = 0.02) -> set[str]:
    """Wait until the profiled run's record is complete; the cases it checked right.

    Raises:
        HarnessError: the record did not complete within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if record_path.exists():
            try:
                record = read_record(record_path)
            except FuseciError:
                record = None  # being replaced right now: atomic, so the next read is whole
            if record is not None and record.complete:
                return set(record.ok_cases()) if not record.interrupted else set()
        time.sleep(poll_s)
    raise HarnessError(f"{record_path}: the profiled run's record did not complete within {timeout_s:g} s")


def run(
    suite: Suite,
    record_path: Path,
    only: set[str] | None = None,
    *,
    timing: TimingOptions | None = None,
    check: bool = True,
    stop: Callable[[], bool] | None = None,
    prior: HarnessRecord | None = None,
    first_calls: bool = False,
    passes: int = 1,
) -> HarnessRecord:
    """Run every case (or those in ``only``), rewriting the record after each.

    With ``timing`` the variants are timed with CUDA events (copy bandwidth first) instead of profiled ``passes``
    times in NVTX ranges; then ``check=False`` skips the checks and ``first_calls`` still times each first call.
    ``stop`` is asked before each case: when it says so, the record is returned incomplete, to be passed back as
    ``prior`` for the rest.

    Raises:
        HarnessError: (``timing`` only) the copy bandwidth buffers do not fit on the device.
    """
    search = search_path(suite)
    _put_on_path(search)
    cubins.listen()  # before anything compiles or loads a kernel
    usable = start_frameworks(suite)
    arrays.compiler_keys_ready()  # before any variant is called or anything is measured
    record = prior or HarnessRecord(suite=suite.name, env=collect_env(usable), cases={})
    tuned = any(f.name == "torch" for f in usable)
    if tuned:
        best_configs.listen()
    if tuned and prior is None:
        record = replace(record, pinned=_pinned(suite, record))
    if timing is not None:
        l2_bytes = record.env["l2_bytes"]
        assert isinstance(l2_bytes, int), l2_bytes  # the device's, from collect_env
        timing = replace(timing, l2_bytes=l2_bytes)
        if record.copy_bandwidth is None:
            log.info("copy bandwidth")
            record = replace(record, copy_bandwidth=copy_bandwidth())
    write_record(record, record_path)
    cases: dict[str, CaseRecord] = dict(record.cases)
    todo = [case for case in suite.cases if (only is None or case.id in only) and case.id not in cases]
    for i, case in enumerate(todo):
        if stop is not None and stop():
            log.info("stopping before case %s", case.id)
            return replace(record, cases=dict(cases), running=None, complete=False)
        log.info("case %s", case.id)
        write_record(replace(record, cases=dict(cases), running=case.id), record_path)  # names a hang
        cases[case.id] = factory.noted(
            case,
            watch.noted(run_case(suite, case, search, timing, check=check, first_calls=first_calls, passes=passes)),
        )
        if cases[case.id].status is CaseStatus.ERROR and not arrays.context_alive():
            # A sticky CUDA error (illegal address, kernel fault): later cases cannot run.
            for later in todo[i + 1 :]:
                cases[later.id] = CaseRecord(
                    later.id, CaseStatus.ERROR, f"not run: case {case.id!r} left the CUDA context unusable"
                )
            cases[case.id] = replace(
                cases[case.id], message=cases[case.id].message + " (the CUDA context is lost: later cases were not run)"
            )
            break
        write_record(replace(record, cases=dict(cases)), record_path)
    record = replace(record, cases=dict(cases), complete=True, autotune=best_configs.used() if tuned else {})
    write_record(record, record_path)
    return record


def with_code(record: HarnessRecord, record_path: Path) -> HarnessRecord:
    """The record, written again with the compiled code of every cubin the process loaded, by
    kernel name (after the GPU's turn: it needs no GPU)."""
    compiled = disassembly.compiled_code(cubins.opened())
    code = {name: tuple(builds) for name, builds in compiled.code.items()}
    record = replace(record, code=code, code_notes=compiled.notes)
    write_record(record, record_path)
    return record


def _pinned(suite: Suite, record: HarnessRecord) -> str:
    """Put the autotuning choices kept with the suite's baseline for this card into Inductor's
    compile cache (a BaselineError where the kept file is bad); what was done, as the run's note."""
    root = os.environ.get(kept.ROOT_ENV)
    if not root:
        return ""
    in_place, replaced = best_configs.pin(Path(root), str(record.env.get("gpu_name", "")), suite.name)
    if not in_place:
        return ""
    instead = f", {replaced} of them {kept.REPLACED}" if replaced else ""
    return (
        f"{in_place} autotuning choice(s) kept with the baseline in place in the compile cache before compiling{instead}: "
        "kernels whose code did not change run the baseline's configurations"
    )


def start_frameworks(suite: Suite) -> list[arrays.Framework]:
    """Set up the suite's frameworks in the GPU's turn; those that fail are left for their cases to report."""
    usable = []
    for name in suite.frameworks:
        framework = arrays.get(name)
        try:
            framework.load()
            framework.start()
        except FuseciError as exc:
            log.warning("framework %s: %s", name, exc)
            continue
        usable.append(framework)
    return usable
