"""Find ncu, build its command line (a pure function), run it, and explain its failures."""

from __future__ import annotations

import glob
import logging
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fuseci import process, schema
from fuseci.errors import NcuError
from fuseci.suite import NcuSettings

log = logging.getLogger(__name__)

_FALLBACK_GLOBS = (
    "/usr/local/cuda/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/NVIDIA-Nsight-Compute*/ncu",
)


@dataclass(frozen=True, slots=True)
class ProfileFiles:
    """Where one suite's profiled run writes its outputs."""

    report: Path
    """The ``.ncu-rep`` ncu exports."""
    record: Path
    """The harness record (``.harness.json``)."""
    ncu_log: Path
    """ncu's own messages (``==PROF==``, ``==WARNING==``, ``==ERROR==``)."""
    app_log: Path
    """The harness's stdout and stderr."""

    @classmethod
    def in_dir(cls, directory: Path, suite: str) -> ProfileFiles:
        """The standard names inside a report directory."""
        return cls(
            report=directory / f"{suite}.ncu-rep",
            record=directory / f"{suite}.harness.json",
            ncu_log=directory / f"{suite}.ncu.log",
            app_log=directory / f"{suite}.harness.log",
        )


def find_ncu(explicit: str | None = None) -> str:
    """Locate the ncu executable: ``explicit``, ``$FUSECI_NCU``, PATH, then usual install dirs.

    Raises:
        NcuError: not found anywhere; the message lists where it looked.
    """
    for candidate in (explicit, os.environ.get("FUSECI_NCU")):
        if candidate:
            if shutil.which(candidate):
                return str(shutil.which(candidate))
            raise NcuError(f"ncu not found at {candidate!r}; check --ncu / FUSECI_NCU")
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in _FALLBACK_GLOBS:
        matches = sorted(glob.glob(pattern))
        if matches:
            return matches[-1]
    raise NcuError(
        "ncu (Nsight Compute) not found on PATH or in "
        + ", ".join(_FALLBACK_GLOBS)
        + "; install Nsight Compute (it ships with the CUDA toolkit) and put it on PATH, or pass "
        "--ncu PATH. Without a GPU, re-analyse a recorded report with --from-report."
    )


def ncu_version(ncu: str) -> str:
    """The version ``ncu --version`` prints, e.g. ``2025.3.1.0``.

    Raises:
        NcuError: ncu does not run or prints no version.
    """
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NcuError(f"cannot run {ncu} --version: {exc}") from None
    m = re.search(r"Version\s+(\S+)", out.stdout)
    if not m:
        raise NcuError(
            f"{ncu} --version printed no version (exit {out.returncode}): {out.stdout.strip() or out.stderr.strip()}"
        )
    return m.group(1)


def build_command(
    ncu: str,
    suite_name: str,
    suite_path: Path,
    settings: NcuSettings,
    files: ProfileFiles,
    python: str = sys.executable,
) -> list[str]:
    """The full argv of one profiled run of a suite. Pure: same inputs, same list."""
    return [
        ncu,
        "--config-file", "off",
        "--nvtx",
        "--nvtx-include", schema.range_filter(suite_name),
        "--metrics", ",".join(schema.NCU_METRICS),
        "--clock-control", settings.clock_control,
        "--cache-control", settings.cache_control,
        "--replay-mode", settings.replay_mode,
        "--export", str(files.report),
        "--force-overwrite",
        "--log-file", str(files.ncu_log),
        python, "-m", "fuseci.harness", str(suite_path),
        "--record", str(files.record),
    ]  # fmt: skip


_PERMISSION_FIX = (
    "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM). Fix one of: run as root "
    "or with CAP_SYS_ADMIN (containers: --cap-add=SYS_ADMIN, driver >= R565 also CAP_PERFMON); or "
    "allow all users host-wide with `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in "
    "/etc/modprobe.d and a reboot (check: grep RmProfilingAdminOnly /proc/driver/nvidia/params)"
)
_DCGM_FIX = (
    "the counters are held by another profiler, usually DCGM; pause it around the run with "
    "`dcgmi profile --pause` ... `dcgmi profile --resume`"
)


def run_profile(argv: list[str], files: ProfileFiles, timeout_s: float, cwd: Path | None = None) -> bool:
    """Run ncu and classify what went wrong.

    Returns:
        True when a report was written; False when ncu profiled no kernel at all (the caller
        decides, from the harness record, whether that is an error).

    Raises:
        NcuError: ncu could not start, timed out, was refused the counters, the harness crashed,
            or no report was written. The message names the log files.
    """
    files.report.parent.mkdir(parents=True, exist_ok=True)
    for stale in (files.report, files.record, files.ncu_log):
        stale.unlink(missing_ok=True)
    try:
        returncode = process.run_logged(argv, files.app_log, timeout_s, cwd)
    except FileNotFoundError:
        raise NcuError(f"cannot execute {argv[0]}: file not found") from None
    except PermissionError:
        raise NcuError(f"cannot execute {argv[0]}: permission denied") from None
    except subprocess.TimeoutExpired:
        raise NcuError(
            f"the profiled run did not finish within {timeout_s:g} s (suite key ncu.timeout); "
            f"see {files.app_log} and {files.ncu_log}"
        ) from None
    ncu_log = files.ncu_log.read_text(encoding="utf-8", errors="replace") if files.ncu_log.exists() else ""
    logs = f"ncu log {files.ncu_log}, harness log {files.app_log}"
    if "ERR_NVGPUCTRPERM" in ncu_log:
        raise NcuError(f"{_PERMISSION_FIX}; {logs}")
    if "driver resource was unavailable" in ncu_log:
        raise NcuError(f"{_DCGM_FIX}; {logs}")
    if returncode != 0:
        how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with code {returncode}"
        detail = process.tail(files.app_log, 8) or process.tail(files.ncu_log, 8)
        raise NcuError(f"the profiled run {how}; {logs}; last lines:\n{detail}")
    if not files.report.exists():
        if "No kernels were profiled" in ncu_log:
            return False
        raise NcuError(
            f"ncu exited 0 but wrote no report at {files.report}; {logs}; last lines:\n{process.tail(files.ncu_log, 8)}"
        )
    return True
