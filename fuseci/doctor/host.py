"""Checks 1 to 5: fuseci and Python, ncu, the report reader, the GPUs and their clocks."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import JsonValue

import fuseci
from fuseci import __version__
from fuseci.doctor.diagnosis import (
    CLOCK_FIELDS,
    CLOCKS_FIX,
    GPU_FIELDS,
    GPU_FIX,
    NCU_FIX,
    Check,
    CheckStatus,
    Clocks,
    Gpu,
    _check,
)
from fuseci.errors import NcuError, ReportError
from fuseci.frames import report
from fuseci.measure import profile as ncu

log = logging.getLogger(__name__)


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


#: The array frameworks doctor reports, by their distributions (the first one installed counts):
#: a suite's functions take CuPy arrays or torch tensors; torch.compile generates Triton.
FRAMEWORK_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "CuPy": ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"),
    "PyTorch": ("torch",),
    "Triton": ("triton",),
}


def framework_versions() -> dict[str, str]:
    """The installed version of each array framework fuseci knows, read from package metadata (nothing imported)."""
    found = {label: [_distribution_version(d) for d in dists] for label, dists in FRAMEWORK_DISTRIBUTIONS.items()}
    return {label: next(v for v in versions if v) for label, versions in found.items() if any(versions)}


def check_fuseci(python: str = sys.executable) -> Check:
    """fuseci's and Python's versions and where they live, and the array frameworks installed; always OK."""
    where = Path(fuseci.__file__).resolve().parent
    detail = f"fuseci {__version__} ({where}), Python {platform.python_version()} ({sys.executable})"
    if python != sys.executable:
        detail += f"; the probe runs under {python}"
    frameworks: dict[str, JsonValue] = dict(framework_versions())
    missing = [label for label in FRAMEWORK_DISTRIBUTIONS if label not in frameworks]
    detail += "\narray frameworks: " + (", ".join(f"{k} {v}" for k, v in frameworks.items()) or "none")
    if missing:
        detail += f" ({', '.join(missing)} not installed{': suites with framework: torch need it' if 'PyTorch' in missing else ''})"
    return _check(
        "fuseci",
        CheckStatus.OK,
        detail,
        fuseci_version=__version__,
        fuseci_path=str(where),
        python_version=platform.python_version(),
        python=sys.executable,
        probe_python=python,
        platform=platform.platform(),
        frameworks=frameworks,
    )


def check_ncu(explicit: str | None = None) -> tuple[Check, str | None]:
    """Find ncu and ask its version: the check, and the ncu executable when it runs (else None)."""
    try:
        exe = ncu.find_ncu(explicit)
    except NcuError as exc:
        return _check("ncu", CheckStatus.FAIL, str(exc).removesuffix(f"; {ncu.INSTALL_FIX}"), ncu.INSTALL_FIX), None
    try:
        version = ncu.ncu_version(exe)
    except NcuError as exc:
        return _check("ncu", CheckStatus.FAIL, str(exc), NCU_FIX, path=exe), None
    return _check("ncu", CheckStatus.OK, f"ncu {version} ({exe})", path=exe, version=version), exe


def check_reader() -> Check:
    """Import ``ncu_report`` as ``fuseci run`` does, and say which copy it found."""
    try:
        module = report.load_reader(ncu.find_ncu_or_none())
    except ReportError as exc:
        fix = f"install it into this Python: `{sys.executable} -m pip install ncu-report` (a dependency of fuseci)"
        return _check("reader", CheckStatus.FAIL, str(exc), fix)
    path = Path(getattr(module, "__file__", None) or "?")
    if path.parent.name == "python" and path.parent.parent.name == "extras":
        source, version, where = "ncu-extras", None, "ncu's extras/python"
    else:
        source, version, where = "pypi", _distribution_version("ncu-report"), "the PyPI package ncu-report"
    detail = f"ncu_report {version or '(version unknown)'} from {where} ({path})"
    return _check("reader", CheckStatus.OK, detail, source=source, version=version, path=str(path))


def smi_command(fields: Sequence[str], smi: str = "nvidia-smi") -> list[str]:
    """The argv of one ``nvidia-smi --query-gpu`` query. Pure."""
    return [smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"]


def _smi(fields: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run one query (FileNotFoundError: nvidia-smi is not on PATH)."""
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


def sm_name(cap: str) -> str:
    """``9.0`` → ``sm_90``; anything else (``[N/A]``) as it is."""
    return "sm_" + cap.replace(".", "") if re.fullmatch(r"\d+\.\d+", cap) else f"compute capability {cap}"


def check_gpu(timeout_s: float = 30.0) -> tuple[Check, list[Gpu]]:
    """List the GPUs with nvidia-smi: the check, and the GPUs (empty when none is visible)."""
    try:
        out = _smi(GPU_FIELDS, timeout_s)
    except FileNotFoundError:
        detail = "no NVIDIA GPU visible: nvidia-smi is not on PATH (no NVIDIA driver here, or not passed into this container)"
        return _check("gpu", CheckStatus.FAIL, detail, GPU_FIX), []
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _check("gpu", CheckStatus.FAIL, f"no NVIDIA GPU visible: nvidia-smi did not run ({exc})", GPU_FIX), []
    text = "\n".join(part.strip() for part in (out.stdout, out.stderr) if part.strip())
    gpus = parse_gpus(out.stdout) if out.returncode == 0 else []
    if not gpus:
        said = " | ".join(text.splitlines()[:3]) or "nothing"
        detail = f"no NVIDIA GPU visible: nvidia-smi exited with code {out.returncode} and said: {said}"
        return _check("gpu", CheckStatus.FAIL, detail, GPU_FIX, returncode=out.returncode, output=text), []
    lines = [f"GPU {g.index}: {g.name}, {sm_name(g.compute_capability)}, driver {g.driver}" for g in gpus]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        lines.append(f"CUDA_VISIBLE_DEVICES={visible!r}: CUDA programs see only these")
    facts: list[JsonValue] = [
        {"index": g.index, "name": g.name, "driver_version": g.driver, "compute_capability": g.compute_capability}
        for g in gpus
    ]
    return _check("gpu", CheckStatus.OK, "\n".join(lines), gpus=facts, cuda_visible_devices=visible), gpus


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
    return [
        Clocks(
            gpu,
            applications_mhz=_mhz(columns["applications_mhz"][i] or ""),
            default_applications_mhz=_mhz(columns["default_applications_mhz"][i] or ""),
            user_clock_limit={"Active": True, "Not Active": False}.get(columns["user_clock_limit"][i] or ""),
        )
        for i, gpu in enumerate(gpus)
    ]


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
            line += f"; application clocks {_mhz_text(s.applications_mhz)} (default {_mhz_text(s.default_applications_mhz)})"
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
    facts: list[JsonValue] = [
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
    status, fix = (CheckStatus.WARN, CLOCKS_FIX) if changed else (CheckStatus.OK, "")
    return _check("clocks", status, "\n".join(lines), fix, gpus=facts)
