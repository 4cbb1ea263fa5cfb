"""Checks 6 to 8: CuPy and CUDA (the probe outside ncu), profiling (the probe under ncu), and
reading the probe's report back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from fuseci import validation as v
from fuseci.config import names
from fuseci.config.model import NcuSettings
from fuseci.doctor.diagnosis import (
    CUPY_FIX,
    NCU_FIX,
    TAIL_LINES,
    Check,
    CheckStatus,
    DoctorOptions,
    _check,
    _number,
)
from fuseci.doctor.host import sm_name
from fuseci.errors import NcuError, ReportError
from fuseci.frames import report
from fuseci.harness.probe import PROBE_ELEMENTS, PROBE_IDS, ProbeFailure
from fuseci.measure import process
from fuseci.measure import profile as ncu
from fuseci.measure.command import Mode, SuiteFiles, harness_argv
from fuseci.records.harness import ProbeRecord

if TYPE_CHECKING:
    import pandas as pd


def build_probe_command(record: Path, python: str = sys.executable) -> list[str]:
    """The argv of the probe: one tiny CuPy kernel in its NVTX range. Pure."""
    return harness_argv(Mode.PROBE, record, python=python)


def read_probe(path: Path) -> ProbeRecord | None:
    """The probe's record; None when it is missing or not a probe record."""
    try:
        return v.validate(ProbeRecord, json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):  # v.Invalid is a ValueError
        return None


def assess_probe(returncode: int, probe: ProbeRecord | None, tail: str, python: str = sys.executable) -> Check:
    """Judge the probe from its exit status, its record and its output's last lines. Pure."""
    if probe is None:
        detail = f"the probe exited with code {returncode} and wrote no record; its last lines:\n{tail or '(none)'}"
        fix = f"run `{python} -m fuseci.harness --probe --record probe.json` to see the whole error"
        return _check("cupy", CheckStatus.FAIL, detail, fix, returncode=returncode)
    facts: dict[str, JsonValue] = {
        "returncode": returncode,
        "error": probe.error,
        "message": probe.message,
        "env": dict(probe.env),
    }
    if probe.ok and returncode == 0:
        e = probe.env
        detail = (
            f"{_runtime(e)}, CUDA runtime {e.get('cuda_runtime', '?')} "
            f"(the driver supports {e.get('cuda_driver_api', '?')}), {e.get('gpu_name', '?')} "
            f"({sm_name(str(e.get('compute_capability', '?')))}); a kernel on {PROBE_ELEMENTS} random "
            f"floats computed the right result"
        )
        return _check("cupy", CheckStatus.OK, detail, max_abs_err=probe.max_abs_err, **facts)
    if probe.error == ProbeFailure.NO_CUPY:
        detail, fix = f"no device runtime can be imported by {python}: {probe.message}", CUPY_FIX
    elif probe.error == ProbeFailure.NO_DEVICE:
        detail = f"CuPy sees no CUDA device: {probe.message}"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        fix = (
            f"nvidia-smi lists a GPU but CUDA does not: check CUDA_VISIBLE_DEVICES (now {visible!r}); with "
            "cudaErrorInsufficientDriver the driver is older than this CuPy's CUDA: update the driver or " + CUPY_FIX
        )
    elif probe.error == ProbeFailure.WRONG:
        detail = f"the probe's kernel computed a wrong result: {probe.message}"
        fix = (
            "the GPU or its driver misbehaves: look for Xid errors in `dmesg` and ECC errors in `nvidia-smi -q -d ECC`"
        )
    else:
        detail = f"the probe failed ({probe.error or f'exit {returncode}'}): {probe.message or tail}"
        fix = (
            "a CuPy built for another CUDA major version than the driver's, or no CUDA compiler (NVRTC) it can "
            "load: " + CUPY_FIX
        )
    return _check("cupy", CheckStatus.FAIL, detail, fix, **facts)


def _runtime(env: Mapping[str, Any]) -> str:
    """What fuseci's own device work ran through, as the probe found it."""
    if env.get("runtime") == "torch":
        return f"PyTorch {env.get('torch_version', '')} as the runtime (no CuPy)".replace("  ", " ")
    return f"CuPy {env.get('cupy_version', '?')}"


def check_cupy(options: DoctorOptions, work: Path) -> Check:
    """Run the probe outside ncu, in a child process, and judge it."""
    record, log_path = work / "probe.json", work / "probe.log"
    argv = build_probe_command(record, options.python)
    try:
        returncode = process.run_logged(argv, log_path, options.probe_timeout_s)
    except OSError as exc:
        return _check("cupy", CheckStatus.FAIL, f"cannot execute {argv[0]}: {exc.strerror or exc}", CUPY_FIX)
    except subprocess.TimeoutExpired:
        detail = (
            f"the probe did not finish within {options.probe_timeout_s:g} s; its last lines:\n"
            f"{process.tail(log_path, TAIL_LINES) or '(none)'}"
        )
        fix = "is the GPU hung or held by another process? see `nvidia-smi`"
        return _check("cupy", CheckStatus.FAIL, detail, fix)
    return assess_probe(returncode, read_probe(record), process.tail(log_path, TAIL_LINES), options.python)


def build_profile_command(
    ncu_exe: str, files: SuiteFiles, python: str = sys.executable, sections: Path | None = None
) -> list[str]:
    """The argv of the probe under ncu, with ``fuseci run``'s default settings and metrics. Pure."""
    return [
        *ncu.profiler_argv(ncu_exe, names.range_filter(PROBE_IDS[0]), NcuSettings(), files, sections),
        *build_probe_command(files.record, python),
    ]


def assess_profile(run: ncu.ProfileRun, files: SuiteFiles) -> Check:
    """Judge the probe's run under ncu with what ncu.py knows of ncu's failures."""
    facts = {"outcome": run.outcome.value, "returncode": run.returncode}
    if run.outcome is ncu.ProfileOutcome.REPORT:
        size = files.report.stat().st_size if files.report.exists() else 0
        detail = f"ncu read the counters of the probe's kernel and wrote a report ({size} bytes)"
        return _check("profiling", CheckStatus.OK, detail, **facts)
    if run.fix:  # a cause ncu names in its log: permission, DCGM
        return _check("profiling", CheckStatus.FAIL, run.problem, run.fix, **facts)
    detail = run.problem
    ncu_tail = process.tail(files.ncu_log, TAIL_LINES)
    if run.tail:
        detail += f"; last lines:\n{run.tail}"
    if ncu_tail and ncu_tail != run.tail:
        detail += f"\nncu's log ends:\n{ncu_tail}"
    read = (
        "the probe runs outside ncu (see 'CuPy, CUDA') but not under it: read the lines above"
        if run.outcome is ncu.ProfileOutcome.APP_FAILED
        else "read ncu's log above"
    )
    fix = f"{read}; an ncu older than the driver or the GPU fails this way: update Nsight Compute"
    return _check("profiling", CheckStatus.FAIL, detail, fix, **facts)


def check_profiling(ncu_exe: str, options: DoctorOptions, work: Path) -> tuple[Check, Path | None]:
    """Run the probe under ncu: the check, and the report when one was written."""
    files = SuiteFiles(work, PROBE_IDS[0])
    try:
        with ncu.no_sections() as sections:
            argv = build_profile_command(ncu_exe, files, options.python, sections)
            run = ncu.run_ncu(argv, files, options.profile_timeout_s)
    except NcuError as exc:
        return _check("profiling", CheckStatus.FAIL, str(exc), NCU_FIX), None
    except subprocess.TimeoutExpired:
        detail = (
            f"the probe under ncu did not finish within {options.profile_timeout_s:g} s; ncu's log ends:\n"
            f"{process.tail(files.ncu_log, TAIL_LINES) or '(empty)'}"
        )
        fix = "is the GPU held by another process or profiler? see `nvidia-smi`"
        return _check("profiling", CheckStatus.FAIL, detail, fix), None
    check = assess_profile(run, files)
    return check, files.report if check.status is CheckStatus.OK else None


_UPDATE_READER = "update ncu-report (`pip install -U ncu-report`) to a version at least as new as ncu"


def assess_readback(frame: pd.DataFrame) -> Check:
    """Exactly one kernel, in the probe's range, with a positive DRAM read count or duration. Pure."""
    where = "/".join(PROBE_IDS)
    mine = frame[
        (frame[names.SUITE] == PROBE_IDS[0])
        & (frame[names.CASE] == PROBE_IDS[1])
        & (frame[names.VARIANT] == PROBE_IDS[2])
    ]
    facts: dict[str, Any] = {"kernels": len(frame), "in_probe_range": len(mine)}
    fix = f"the reader does not read what this ncu writes as fuseci expects: {_UPDATE_READER}"
    if len(mine) != 1 or len(frame) != 1:
        detail = f"expected exactly one kernel in {where}; the report holds {len(mine)} there and {len(frame) - len(mine)} elsewhere"
        return _check("readback", CheckStatus.FAIL, detail, fix, **facts)
    row = mine.iloc[0]
    read, duration = _number(row[names.DRAM_READ]), _number(row[names.DURATION])
    facts.update(kernel=str(row[names.KERNEL]), dram_bytes_read=read, duration_ns=duration)
    if not ((read or 0) > 0 or (duration or 0) > 0):
        detail = f"the kernel in {where} has no positive {names.DRAM_READ} ({read}) or {names.DURATION} ({duration})"
        return _check("readback", CheckStatus.FAIL, detail, fix, **facts)
    detail = (
        f"1 kernel ({row[names.KERNEL]}) in {where}: {names.DRAM_READ} {(read or 0) / 1e6:.1f} MB, "
        f"{names.DURATION} {(duration or 0) / 1e3:.1f} us"
    )
    return _check("readback", CheckStatus.OK, detail, **facts)


def check_readback(path: Path) -> Check:
    """Read the probe's report as ``fuseci run`` reads a suite's, and judge it."""
    try:
        frame = report.read_report(path, ncu=ncu.find_ncu_or_none())
    except ReportError as exc:
        return _check("readback", CheckStatus.FAIL, str(exc), _UPDATE_READER)
    return assess_readback(frame)
