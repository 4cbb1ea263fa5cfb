"""What ``fuseci doctor`` finds: the checks, their verdicts, the fixes it suggests."""

from __future__ import annotations

import enum
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from fuseci.errors import EXIT_PASS, EXIT_SETUP

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
#: Clock fields asked one query each (an older driver may not know one): fuseci's name, nvidia-smi's to try in turn.
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

NCU_FIX = "reinstall Nsight Compute, or point --ncu / FUSECI_NCU at an ncu that runs"
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
    "header): `pip install 'fuseci[cuda12]'` for CUDA 12, `pip install 'fuseci[cuda13]'` for CUDA 13; "
    "or, for suites whose functions all take torch tensors, PyTorch with CUDA alone: `pip install 'fuseci[torch]'`"
)


class CheckStatus(enum.Enum):
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
    status: CheckStatus
    detail: str
    """What was found; may span several lines."""
    fix: str = ""
    """How to fix a WARN, FAIL or SKIP; empty for OK."""
    facts: Mapping[str, JsonValue] = field(default_factory=dict)
    """What was found, for machines (versions, paths, GPUs)."""

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
        return EXIT_SETUP if any(c.status is CheckStatus.FAIL for c in self.checks) else EXIT_PASS


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
    """A user setting (application or locked clocks) limits the clocks; None when not reported."""


def _check(name: str, status: CheckStatus, detail: str, fix: str = "", /, **facts: JsonValue) -> Check:
    return Check(name, status, detail, fix, facts)


def _skip(name: str, blocker: str) -> Check:
    return Check(
        name, CheckStatus.SKIP, f"not run: the '{CHECKS[blocker]}' check failed", f"fix '{CHECKS[blocker]}' first"
    )


def _number(value: Any) -> float | None:
    """A finite float for JSON, or None."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None
