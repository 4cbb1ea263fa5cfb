"""``fuseci doctor``: check that this machine can run fuseci, and say how to fix what cannot.

The checks, in order (:data:`CHECKS`); one that cannot run because an earlier one failed is
``SKIP`` and names that one:

1. ``fuseci``: fuseci's and Python's versions and paths (always OK).
2. ``ncu``: Nsight Compute found (:func:`fuseci.ncu.find_ncu`) and its version.
3. ``reader``: NVIDIA's ``ncu_report`` importable (:func:`fuseci.report.load_reader`): the
   PyPI package or the copy in ncu's ``extras/python``.
4. ``gpu``: ``nvidia-smi`` lists at least one GPU (name, compute capability, driver).
5. ``clocks``: current and maximum SM clocks of each GPU; WARN (never FAIL) when application
   clocks were changed or a user clock setting limits them. Only read: doctor changes nothing.
6. ``cupy``: ``python -m fuseci.harness --probe`` in a child process (this process never imports
   CuPy): CuPy, the CUDA runtime and one tiny kernel whose result is checked.
7. ``profiling``: the same probe under ncu with ``fuseci run``'s default settings and metrics:
   counter permission, counters held by DCGM, crashes, nothing profiled.
8. ``readback``: the report of that run read back with ``ncu_report``: exactly one kernel, in the
   probe's NVTX range, with a positive DRAM byte count or duration.

Nothing here raises for a missing tool, GPU or library: each becomes a failed check whose fix
says what to do. :func:`diagnose` runs them all; :func:`render_table` and :func:`render_json`
render the result.
"""

from __future__ import annotations

import enum
import importlib.metadata
import json
import logging
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import fuseci
from fuseci import __version__, ncu, process, report, schema
from fuseci.errors import EXIT_PASS, EXIT_SETUP, NcuError, ReportError
from fuseci.harness import PROBE_ELEMENTS, PROBE_FORMAT, PROBE_IDS, ProbeFailure
from fuseci.suite import NcuSettings

log = logging.getLogger(__name__)

#: Every check, in the order run, with its title in the table.
CHECKS: dict[str, str] = {
    "fuseci": "fuseci, Python",
    "ncu": "ncu",
    "reader": "report reader",
    "gpu": "GPU, driver",
    "clocks": "GPU clocks",
    "cupy": "CuPy, CUDA",
    "profiling": "profiling",
    "readback": "report readback",
}

#: The JSON document's ``format`` and ``format_version``.
FORMAT = "fuseci-doctor"
FORMAT_VERSION = 1

#: What ``nvidia-smi --query-gpu`` is asked for every GPU, in this order.
GPU_FIELDS: tuple[str, ...] = ("name", "driver_version", "compute_cap", "clocks.sm", "clocks.max.sm")
#: Clock fields asked one query each, since an older driver may not know one: (fuseci's name,
#: the nvidia-smi fields to try in turn).
CLOCK_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("applications_mhz", ("clocks.applications.graphics",)),
    ("default_applications_mhz", ("clocks.default_applications.graphics",)),
    (
        "user_clock_limit",
        ("clocks_event_reasons.applications_clocks_setting", "clocks_throttle_reasons.applications_clocks_setting"),
    ),
)
#: Lines of a child's log quoted in a check's detail.
TAIL_LINES = 8

GPU_FIX = (
    "check that the NVIDIA driver is installed and loaded (`nvidia-smi` lists the GPUs on the host); in a "
    "container, start it with the GPUs passed in (`docker run --gpus all`, the NVIDIA Container Toolkit; "
    "Kubernetes: a nvidia.com/gpu resource limit); check that CUDA_VISIBLE_DEVICES does not hide them"
)
CLOCKS_FIX = (
    "fuseci profiles with --clock-control none, so a clock setting left on the card moves durations (not byte "
    "counts) against baselines recorded on a card in its default state. Reset them, as root, with "
    "`nvidia-smi -rgc` (locked clocks) and `nvidia-smi -rac` (application clocks), or ask the runner's owner. "
    "fuseci doctor only reads the clocks, it never changes them"
)
CUPY_FIX = (
    "install fuseci with the CuPy of the driver's CUDA major version (the `CUDA Version` in nvidia-smi's "
    "header): `pip install 'fuseci[cuda12]'` for CUDA 12, `pip install 'fuseci[cuda13]'` for CUDA 13"
)


class Status(enum.Enum):
    """The result of one check."""

    OK = "OK"
    """Works."""
    WARN = "WARN"
    """Works, but something may distort the measurements; never changes the exit code."""
    FAIL = "FAIL"
    """Broken: fuseci cannot run here until it is fixed."""
    SKIP = "SKIP"
    """Not run, because a check it depends on failed."""


@dataclass(frozen=True, slots=True)
class Check:
    """One check's verdict, what it found and how to fix it."""

    name: str
    """Its key in :data:`CHECKS`."""
    status: Status
    """The verdict."""
    detail: str
    """What was found; may span several lines."""
    fix: str = ""
    """How to fix a WARN, FAIL or SKIP; empty for OK."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    """What was found, for machines (versions, paths, GPUs); JSON values only."""

    @property
    def title(self) -> str:
        """Its title in the table."""
        return CHECKS[self.name]


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Every check, in :data:`CHECKS` order."""

    checks: tuple[Check, ...]
    """The checks run or skipped."""

    @property
    def exit_code(self) -> int:
        """3 when a check failed, else 0 (warnings and skips do not fail)."""
        return EXIT_SETUP if any(c.status is Status.FAIL for c in self.checks) else EXIT_PASS

    def check(self, name: str) -> Check:
        """The check called ``name``.

        Raises:
            KeyError: no check of that name was run or skipped.
        """
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class DoctorOptions:
    """Where to look and how long to wait."""

    ncu: str | None = None
    """Explicit ncu executable (``--ncu``); default ``$FUSECI_NCU``, then PATH and the usual places."""
    python: str = sys.executable
    """The Python that runs the probe: fuseci and CuPy must be importable there."""
    smi_timeout_s: float = 30.0
    """Limit of each ``nvidia-smi`` query."""
    probe_timeout_s: float = 180.0
    """Limit of the probe outside ncu (CuPy's import and first compilation included)."""
    profile_timeout_s: float = 300.0
    """Limit of the probe under ncu."""


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as ``nvidia-smi`` lists it."""

    index: int
    """Its index in nvidia-smi's list."""
    name: str
    """Product name, e.g. ``NVIDIA H200``."""
    driver: str
    """Driver version."""
    compute_capability: str
    """``major.minor``, e.g. ``9.0``."""
    sm_mhz: int | None
    """Current SM clock; None when not reported."""
    max_sm_mhz: int | None
    """Maximum SM clock; None when not reported."""


@dataclass(frozen=True, slots=True)
class Clocks:
    """One GPU's clock state: what the clocks row judges."""

    gpu: Gpu
    """The GPU, with its current and maximum SM clocks."""
    applications_mhz: int | None = None
    """Application graphics clock in force; None when not reported."""
    default_applications_mhz: int | None = None
    """The card's default application graphics clock; None when not reported."""
    user_clock_limit: bool | None = None
    """The clocks event reason "applications clocks setting" is active: a user setting (application
    or locked clocks) limits the clocks; None when not reported."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What ``python -m fuseci.harness --probe`` wrote in its record."""

    ok: bool
    """The kernel ran and computed the right result."""
    error: str
    """A :class:`fuseci.harness.ProbeFailure` value; empty when ok."""
    message: str
    """What failed, in the probe's words; empty when ok."""
    env: Mapping[str, Any]
    """:func:`fuseci.harness.collect_env` (GPU, CUDA, CuPy); empty when the probe got no device."""
    max_abs_err: float | None
    """Largest error of the kernel's result; None when it did not run."""


def _check(name: str, status: Status, detail: str, fix: str = "", /, **facts: Any) -> Check:
    return Check(name, status, detail, fix, facts)


def _skip(name: str, blocker: str) -> Check:
    return Check(name, Status.SKIP, f"not run: the '{CHECKS[blocker]}' check failed", f"fix '{CHECKS[blocker]}' first")


def _number(value: Any) -> float | None:
    """A finite float for JSON, or None."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# --- 1. fuseci and Python ----------------------------------------------------------------------


def check_fuseci(python: str = sys.executable) -> Check:
    """fuseci's and Python's versions and where they live; always OK."""
    where = Path(fuseci.__file__).resolve().parent
    detail = f"fuseci {__version__} ({where}), Python {platform.python_version()} ({sys.executable})"
    if python != sys.executable:
        detail += f"; the probe runs under {python}"
    return _check(
        "fuseci",
        Status.OK,
        detail,
        fuseci_version=__version__,
        fuseci_path=str(where),
        python_version=platform.python_version(),
        python=sys.executable,
        probe_python=python,
        platform=platform.platform(),
    )


# --- 2. ncu ------------------------------------------------------------------------------------


def check_ncu(explicit: str | None = None) -> tuple[Check, str | None]:
    """Find ncu and ask its version.

    Returns:
        The check, and the ncu executable when it runs (None otherwise).
    """
    try:
        exe = ncu.find_ncu(explicit)
    except NcuError as exc:
        return _check("ncu", Status.FAIL, str(exc).removesuffix(f"; {ncu.INSTALL_FIX}"), ncu.INSTALL_FIX), None
    try:
        version = ncu.ncu_version(exe)
    except NcuError as exc:
        fix = "reinstall Nsight Compute, or point --ncu / FUSECI_NCU at an ncu that runs"
        return _check("ncu", Status.FAIL, str(exc), fix, path=exe), None
    return _check("ncu", Status.OK, f"ncu {version} ({exe})", path=exe, version=version), exe


# --- 3. report reader --------------------------------------------------------------------------


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_reader() -> Check:
    """Import ``ncu_report`` as ``fuseci run`` does, and say which copy it found."""
    try:
        module = report.load_reader()
    except ReportError as exc:
        fix = f"install it into this Python: `{sys.executable} -m pip install ncu-report` (a dependency of fuseci)"
        return _check("reader", Status.FAIL, str(exc), fix)
    path = Path(getattr(module, "__file__", None) or "?")
    if path.parent.name == "python" and path.parent.parent.name == "extras":
        source, version, where = "ncu-extras", None, "ncu's extras/python"
    else:
        source, version, where = "pypi", _distribution_version("ncu-report"), "the PyPI package ncu-report"
    detail = f"ncu_report {version or '(version unknown)'} from {where} ({path})"
    return _check("reader", Status.OK, detail, source=source, version=version, path=str(path))


# --- 4. GPU and driver, 5. clocks -------------------------------------------------------------


def smi_command(fields: Sequence[str], smi: str = "nvidia-smi") -> list[str]:
    """The argv of one ``nvidia-smi --query-gpu`` query. Pure."""
    return [smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"]


def _smi(fields: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run one query (an argument list, never a shell).

    Raises:
        FileNotFoundError: nvidia-smi is not on PATH.
        OSError: it cannot be executed.
        subprocess.TimeoutExpired: it ran past ``timeout_s``.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise FileNotFoundError("nvidia-smi")
    argv = smi_command(fields, exe)
    log.info("running %s", " ".join(argv))
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)


def _mhz(text: str) -> int | None:
    m = re.fullmatch(r"(\d+)\s*MHz", text.strip())
    return int(m.group(1)) if m else None


def parse_gpus(text: str) -> list[Gpu]:
    """The GPUs in the output of ``nvidia-smi`` queried for :data:`GPU_FIELDS`; other lines are ignored. Pure."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        # The name comes first and is the only field that could hold a comma.
        parts = [p.strip() for p in line.rsplit(",", len(GPU_FIELDS) - 1)]
        if len(parts) != len(GPU_FIELDS) or not parts[0]:
            continue
        name, driver, cap, sm, max_sm = parts
        gpus.append(Gpu(len(gpus), name, driver, cap, _mhz(sm), _mhz(max_sm)))
    return gpus


def _sm(cap: str) -> str:
    """``9.0`` → ``sm_90``; anything else (``[N/A]``) as it is."""
    return "sm_" + cap.replace(".", "") if re.fullmatch(r"\d+\.\d+", cap) else f"compute capability {cap}"


def check_gpu(timeout_s: float = 30.0) -> tuple[Check, list[Gpu]]:
    """List the GPUs with nvidia-smi.

    Returns:
        The check, and the GPUs (empty when none is visible).
    """
    try:
        out = _smi(GPU_FIELDS, timeout_s)
    except FileNotFoundError:
        detail = "no NVIDIA GPU visible: nvidia-smi is not on PATH (no NVIDIA driver here, or not passed into this container)"
        return _check("gpu", Status.FAIL, detail, GPU_FIX), []
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _check("gpu", Status.FAIL, f"no NVIDIA GPU visible: nvidia-smi did not run ({exc})", GPU_FIX), []
    text = "\n".join(part.strip() for part in (out.stdout, out.stderr) if part.strip())
    gpus = parse_gpus(out.stdout) if out.returncode == 0 else []
    if not gpus:
        said = " | ".join(text.splitlines()[:3]) or "nothing"
        detail = f"no NVIDIA GPU visible: nvidia-smi exited with code {out.returncode} and said: {said}"
        return _check("gpu", Status.FAIL, detail, GPU_FIX, returncode=out.returncode, output=text), []
    lines = [f"GPU {g.index}: {g.name}, {_sm(g.compute_capability)}, driver {g.driver}" for g in gpus]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        lines.append(f"CUDA_VISIBLE_DEVICES={visible!r}: CUDA programs see only these")
    facts = [
        {"index": g.index, "name": g.name, "driver_version": g.driver, "compute_capability": g.compute_capability}
        for g in gpus
    ]
    return _check("gpu", Status.OK, "\n".join(lines), gpus=facts, cuda_visible_devices=visible), gpus


def _optional_column(fields: Sequence[str], count: int, timeout_s: float) -> list[str | None]:
    """One value per GPU of the first field nvidia-smi knows; all None when none works."""
    for name in fields:
        try:
            out = _smi([name], timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            break
        values = [line.strip() for line in out.stdout.splitlines() if line.strip()]
        if out.returncode == 0 and len(values) == count:
            return list(values)
    return [None] * count


def read_clocks(gpus: Sequence[Gpu], timeout_s: float = 30.0) -> list[Clocks]:
    """Each GPU's clock state; what nvidia-smi does not report stays None."""
    columns = {key: _optional_column(fields, len(gpus), timeout_s) for key, fields in CLOCK_FIELDS}
    states: list[Clocks] = []
    for i, gpu in enumerate(gpus):
        limit = columns["user_clock_limit"][i]
        states.append(
            Clocks(
                gpu,
                applications_mhz=_mhz(columns["applications_mhz"][i] or ""),
                default_applications_mhz=_mhz(columns["default_applications_mhz"][i] or ""),
                user_clock_limit={"Active": True, "Not Active": False}.get(limit or ""),
            )
        )
    return states


def _mhz_text(value: int | None) -> str:
    return "?" if value is None else f"{value} MHz"


def assess_clocks(states: Sequence[Clocks]) -> Check:
    """Report each GPU's SM clock against its maximum; WARN when a user setting changed the clocks. Pure."""
    lines: list[str] = []
    changed = False
    for s in states:
        g = s.gpu
        line = f"GPU {g.index}: SM clock {_mhz_text(g.sm_mhz)} now, max {_mhz_text(g.max_sm_mhz)}"
        if s.applications_mhz is not None:
            line += f"; application clocks {_mhz_text(s.applications_mhz)}"
            line += f" (default {_mhz_text(s.default_applications_mhz)})"
        notes: list[str] = []
        if None not in (s.applications_mhz, s.default_applications_mhz) and (
            s.applications_mhz != s.default_applications_mhz
        ):
            notes.append("application clocks changed from their default")
        if s.user_clock_limit:
            notes.append("a user clock setting (application or locked clocks) limits the clocks")
        if notes:
            changed = True
            line += ": " + "; ".join(notes)
        elif g.sm_mhz is not None and g.max_sm_mhz is not None and g.sm_mhz < g.max_sm_mhz:
            line += " (below max is normal while the GPU idles)"
        lines.append(line)
    facts = [
        {
            "index": s.gpu.index,
            "sm_mhz": s.gpu.sm_mhz,
            "max_sm_mhz": s.gpu.max_sm_mhz,
            "applications_mhz": s.applications_mhz,
            "default_applications_mhz": s.default_applications_mhz,
            "user_clock_limit": s.user_clock_limit,
        }
        for s in states
    ]
    if changed:
        return _check("clocks", Status.WARN, "\n".join(lines), CLOCKS_FIX, gpus=facts)
    return _check("clocks", Status.OK, "\n".join(lines), gpus=facts)


# --- 6. CuPy and the CUDA runtime --------------------------------------------------------------


def build_probe_command(record: Path, python: str = sys.executable) -> list[str]:
    """The argv of the probe: one tiny CuPy kernel in its NVTX range. Pure."""
    return [python, "-m", "fuseci.harness", "--probe", "--record", str(record)]


def read_probe(path: Path) -> ProbeResult | None:
    """The probe's record; None when it is missing or not a probe record."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != PROBE_FORMAT:
        return None
    env = doc.get("env")
    return ProbeResult(
        ok=doc.get("ok") is True,
        error=str(doc.get("error", "")),
        message=str(doc.get("message", "")),
        env=env if isinstance(env, dict) else {},
        max_abs_err=_number(doc.get("max_abs_err")),
    )


def assess_probe(returncode: int, probe: ProbeResult | None, tail: str, python: str = sys.executable) -> Check:
    """Judge the probe from its exit status, its record and its output's last lines. Pure."""
    if probe is None:
        detail = f"the probe exited with code {returncode} and wrote no record; its last lines:\n{tail or '(none)'}"
        fix = f"run `{python} -m fuseci.harness --probe --record probe.json` to see the whole error"
        return _check("cupy", Status.FAIL, detail, fix, returncode=returncode)
    facts = {"returncode": returncode, "error": probe.error, "message": probe.message, "env": dict(probe.env)}
    if probe.ok and returncode == 0:
        e = probe.env
        detail = (
            f"CuPy {e.get('cupy_version', '?')}, CUDA runtime {e.get('cuda_runtime', '?')} "
            f"(the driver supports {e.get('cuda_driver_api', '?')}), {e.get('gpu_name', '?')} "
            f"({_sm(str(e.get('compute_capability', '?')))}); a kernel on {PROBE_ELEMENTS} random "
            f"floats computed the right result"
        )
        return _check("cupy", Status.OK, detail, max_abs_err=probe.max_abs_err, **facts)
    if probe.error == ProbeFailure.NO_CUPY:
        detail, fix = f"CuPy cannot be imported by {python}: {probe.message}", CUPY_FIX
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
    return _check("cupy", Status.FAIL, detail, fix, **facts)


def check_cupy(options: DoctorOptions, work: Path) -> Check:
    """Run the probe outside ncu, in a child process, and judge it."""
    record, log_path = work / "probe.json", work / "probe.log"
    argv = build_probe_command(record, options.python)
    try:
        returncode = process.run_logged(argv, log_path, options.probe_timeout_s)
    except OSError as exc:
        return _check("cupy", Status.FAIL, f"cannot execute {argv[0]}: {exc.strerror or exc}", CUPY_FIX)
    except subprocess.TimeoutExpired:
        detail = (
            f"the probe did not finish within {options.probe_timeout_s:g} s; its last lines:\n"
            f"{process.tail(log_path, TAIL_LINES) or '(none)'}"
        )
        fix = "is the GPU hung or held by another process? see `nvidia-smi`"
        return _check("cupy", Status.FAIL, detail, fix)
    return assess_probe(returncode, read_probe(record), process.tail(log_path, TAIL_LINES), options.python)


# --- 7. profiling, 8. readback -----------------------------------------------------------------


def build_profile_command(ncu_exe: str, files: ncu.ProfileFiles, python: str = sys.executable) -> list[str]:
    """The argv of the probe under ncu, with ``fuseci run``'s default settings and metrics. Pure."""
    nvtx_filter = schema.range_filter(PROBE_IDS[0])
    return [*ncu.profiler_argv(ncu_exe, nvtx_filter, NcuSettings(), files), *build_probe_command(files.record, python)]


def assess_profile(run: ncu.ProfileRun, files: ncu.ProfileFiles) -> Check:
    """Judge the probe's run under ncu with what ncu.py knows of ncu's failures."""
    facts = {"outcome": run.outcome.value, "returncode": run.returncode}
    if run.outcome is ncu.Outcome.REPORT:
        size = files.report.stat().st_size if files.report.exists() else 0
        detail = f"ncu read the counters of the probe's kernel and wrote a report ({size} bytes)"
        return _check("profiling", Status.OK, detail, **facts)
    if run.fix:  # a cause ncu names in its log: permission, DCGM
        return _check("profiling", Status.FAIL, run.problem, run.fix, **facts)
    detail = run.problem
    ncu_tail = process.tail(files.ncu_log, TAIL_LINES)
    if run.tail:
        detail += f"; last lines:\n{run.tail}"
    if ncu_tail and ncu_tail != run.tail:
        detail += f"\nncu's log ends:\n{ncu_tail}"
    if run.outcome is ncu.Outcome.APP_FAILED:
        fix = (
            "the probe runs outside ncu (see 'CuPy, CUDA') but not under it: read the lines above; an ncu older "
            "than the driver or the GPU fails this way: update Nsight Compute"
        )
    else:
        fix = "read ncu's log above; an ncu older than the driver or the GPU fails this way: update Nsight Compute"
    return _check("profiling", Status.FAIL, detail, fix, **facts)


def check_profiling(ncu_exe: str, options: DoctorOptions, work: Path) -> tuple[Check, Path | None]:
    """Run the probe under ncu.

    Returns:
        The check, and the report when one was written.
    """
    files = ncu.ProfileFiles.in_dir(work, PROBE_IDS[0])
    argv = build_profile_command(ncu_exe, files, options.python)
    try:
        run = ncu.run_ncu(argv, files, options.profile_timeout_s)
    except NcuError as exc:
        fix = "reinstall Nsight Compute, or point --ncu / FUSECI_NCU at an ncu that runs"
        return _check("profiling", Status.FAIL, str(exc), fix), None
    except subprocess.TimeoutExpired:
        detail = (
            f"the probe under ncu did not finish within {options.profile_timeout_s:g} s; ncu's log ends:\n"
            f"{process.tail(files.ncu_log, TAIL_LINES) or '(empty)'}"
        )
        fix = "is the GPU held by another process or profiler? see `nvidia-smi`"
        return _check("profiling", Status.FAIL, detail, fix), None
    check = assess_profile(run, files)
    return check, files.report if check.status is Status.OK else None


def assess_readback(frame: pd.DataFrame) -> Check:
    """Exactly one kernel, in the probe's range, with a positive DRAM read count or duration. Pure."""
    where = "/".join(PROBE_IDS)
    mine = frame[
        (frame[schema.SUITE] == PROBE_IDS[0])
        & (frame[schema.CASE] == PROBE_IDS[1])
        & (frame[schema.VARIANT] == PROBE_IDS[2])
    ]
    facts: dict[str, Any] = {"kernels": len(frame), "in_probe_range": len(mine)}
    fix = (
        "the reader does not read what this ncu writes as fuseci expects: update ncu-report "
        "(`pip install -U ncu-report`) to a version at least as new as ncu"
    )
    if len(mine) != 1 or len(frame) != 1:
        detail = f"expected exactly one kernel in {where}; the report holds {len(mine)} there and {len(frame) - len(mine)} elsewhere"
        return _check("readback", Status.FAIL, detail, fix, **facts)
    row = mine.iloc[0]
    read, duration = _number(row[schema.DRAM_READ]), _number(row[schema.DURATION])
    facts.update(kernel=str(row[schema.KERNEL]), dram_bytes_read=read, duration_ns=duration)
    if not ((read or 0) > 0 or (duration or 0) > 0):
        detail = f"the kernel in {where} has no positive {schema.DRAM_READ} ({read}) or {schema.DURATION} ({duration})"
        return _check("readback", Status.FAIL, detail, fix, **facts)
    detail = (
        f"1 kernel ({row[schema.KERNEL]}) in {where}: {schema.DRAM_READ} {(read or 0) / 1e6:.1f} MB, "
        f"{schema.DURATION} {(duration or 0) / 1e3:.1f} us"
    )
    return _check("readback", Status.OK, detail, **facts)


def check_readback(path: Path) -> Check:
    """Read the probe's report as ``fuseci run`` reads a suite's, and judge it."""
    try:
        frame = report.read_report(path)
    except ReportError as exc:
        fix = "update ncu-report (`pip install -U ncu-report`) to a version at least as new as ncu"
        return _check("readback", Status.FAIL, str(exc), fix)
    return assess_readback(frame)


# --- all of them -------------------------------------------------------------------------------


def diagnose(options: DoctorOptions | None = None) -> Diagnosis:
    """Run every check in order; skip those whose prerequisite failed. Changes nothing on the machine."""
    options = options or DoctorOptions()
    checks = [check_fuseci(options.python)]
    ncu_check, ncu_exe = check_ncu(options.ncu)
    reader = check_reader()
    gpu_check, gpus = check_gpu(options.smi_timeout_s)
    checks += [ncu_check, reader, gpu_check]
    if not gpus:
        return Diagnosis((*checks, *(_skip(name, "gpu") for name in ("clocks", "cupy", "profiling", "readback"))))
    checks.append(assess_clocks(read_clocks(gpus, options.smi_timeout_s)))
    with tempfile.TemporaryDirectory(prefix="fuseci-doctor-") as tmp:
        work = Path(tmp)
        cupy = check_cupy(options, work)
        checks.append(cupy)
        if ncu_exe is None or cupy.status is Status.FAIL:
            blocker = "ncu" if ncu_exe is None else "cupy"
            return Diagnosis((*checks, _skip("profiling", blocker), _skip("readback", blocker)))
        profiling, report_path = check_profiling(ncu_exe, options, work)
        checks.append(profiling)
        if report_path is None:
            checks.append(_skip("readback", "profiling"))
        elif reader.status is Status.FAIL:
            checks.append(_skip("readback", "reader"))
        else:
            checks.append(check_readback(report_path))
    return Diagnosis(tuple(checks))


# --- rendering ---------------------------------------------------------------------------------


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    lines: list[str] = []
    for i, line in enumerate(text.splitlines() or [""]):
        lines += textwrap.wrap(
            line,
            width,
            initial_indent=indent if i else "",
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [""]
    return lines


def render_table(diagnosis: Diagnosis, width: int = 96) -> str:
    """The table for people: one row per check, a ``fix:`` line under each that is not OK."""
    name_width = max(len("check"), *(len(c.title) for c in diagnosis.checks))
    indent = " " * (2 + name_width + 2 + len("status") + 2)
    lines = ["fuseci doctor", "", f"  {'check':<{name_width}}  status  detail"]
    for c in diagnosis.checks:
        body = _wrap(c.detail, width)
        if c.status is not Status.OK and c.fix:
            body += _wrap(f"fix: {c.fix}", width, indent="     ")
        lines.append(f"  {c.title:<{name_width}}  {c.status.value:<6}  {body[0]}".rstrip())
        lines += [f"{indent}{line}".rstrip() for line in body[1:]]
    counts = [
        f"{n} {label}"
        for status, label in (
            (Status.OK, "ok"),
            (Status.WARN, "warn"),
            (Status.FAIL, "failed"),
            (Status.SKIP, "skipped"),
        )
        if (n := sum(c.status is status for c in diagnosis.checks))
    ]
    lines += ["", f"fuseci doctor: {', '.join(counts)}; exit {diagnosis.exit_code}"]
    return "\n".join(lines) + "\n"


def render_json(diagnosis: Diagnosis) -> str:
    """Every check as a JSON document, for machines."""
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fuseci_version": __version__,
        "exit_code": diagnosis.exit_code,
        "checks": [
            {
                "name": c.name,
                "title": c.title,
                "status": c.status.value,
                "detail": c.detail,
                "fix": c.fix,
                "facts": dict(c.facts),
            }
            for c in diagnosis.checks
        ],
    }
    return json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n"
