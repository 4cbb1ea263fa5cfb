"""Names shared by every layer: NVTX ranges, ncu metrics (verbatim end to end), frame columns,
and the quantities that code treats specially (:mod:`fuseci.config.quantities` declares them all).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeGuard

from fuseci.validation import ID_PATTERN, MAX_ID_CHARS


def is_id(value: object) -> TypeGuard[str]:
    """True when ``value`` is a string that is wholly a valid id (see :data:`ID_PATTERN`) of at
    most :data:`MAX_ID_CHARS` characters."""
    return isinstance(value, str) and len(value) <= MAX_ID_CHARS and ID_PATTERN.fullmatch(value) is not None


def id_key(value: str) -> str:
    """The form in which two ids are compared: ignoring letter case, since an id names files
    (a suite's baseline file) and macOS and Windows file systems ignore case in file names."""
    return value.lower()


RANGE_PREFIX = "fuseci"


def range_name(suite: str, case: str, variant: str, again: int = 0) -> str:
    """The NVTX push/pop range the harness opens around one variant's measured run; ``again``
    numbers a repeat of it (a profiled pass after the first, see :func:`parse_range`)."""
    name = f"{RANGE_PREFIX}:{suite}:{case}:{variant}"
    return f"{name}:{again}" if again else name


def range_filter(suite: str) -> str:
    """The ``--nvtx-include`` expression that selects every variant range of ``suite`` (the
    trailing ``/`` matches push/pop ranges)."""
    return f"regex:^{RANGE_PREFIX}:{re.escape(suite)}:.*/"


def parse_range(name: str) -> tuple[str, str, str, int] | None:
    """Split a range name into (suite, case, variant, repeat), or None if it is not one of ours
    (a repeated profiled pass appends its number: ``...:<variant>:1``)."""
    parts = name.split(":")
    if len(parts) not in (4, 5) or parts[0] != RANGE_PREFIX:
        return None
    suite, case, variant = parts[1:4]
    if not all(is_id(p) for p in (suite, case, variant)):
        return None
    again = 0
    if len(parts) == 5:
        if not (parts[4].isascii() and parts[4].isdigit() and len(parts[4]) <= 3 and parts[4][0] != "0"):
            return None
        again = int(parts[4])
    return suite, case, variant, again


#: The ranges a ledger variant's harness opens around each launch it profiles, and around each
#: launch that repeats an earlier one's configuration (left out by :func:`repeat_filter`).
LAUNCH_PREFIX = "fuseci-launch"
REPEAT_PREFIX = "fuseci-repeat"


def launch_range(run: int, launch: int, *, repeat: bool = False) -> str:
    """The range around the ``launch``-th launch of a measured call, in its ``run``-th compiled
    graph run (see :data:`LAUNCH_PREFIX`)."""
    return f"{REPEAT_PREFIX if repeat else LAUNCH_PREFIX}:{run}:{launch}"


def parse_launch_range(name: str) -> tuple[int, int] | None:
    """(run, launch) of a :func:`launch_range` of a profiled launch, or None for any other range."""
    parts = name.split(":")
    if len(parts) != 3 or parts[0] != LAUNCH_PREFIX:
        return None
    if not all(p.isascii() and p.isdigit() and len(p) <= 9 for p in parts[1:]):
        return None
    return int(parts[1]), int(parts[2])


def find_launch_range(stack: Sequence[str]) -> tuple[int, int, int] | None:
    """(position, run, launch) of the first :func:`launch_range` of a profiled launch in an NVTX
    range stack, or None."""
    for i, name in enumerate(stack):
        found = parse_launch_range(name)
        if found is not None:
            return i, found[0], found[1]
    return None


def repeat_filter() -> str:
    """The ``--nvtx-exclude`` expression that leaves out every launch inside a repeat's range."""
    return f"regex:^{REPEAT_PREFIX}:.*/"


# Frame columns (the tidy per-kernel schema, see metrics.py).
SUITE = "suite"
CASE = "case"
VARIANT = "variant"
KERNEL_INDEX = "kernel_index"
KERNEL = "kernel"
#: Which profiled pass of its variant a kernel ran in (0: the first; see :func:`parse_range`).
PASS = "pass"
#: Appended to a counted metric's name: the per-kernel frame's column of how far it moved over the
#: kernel's profiled passes.
SPREAD_SUFFIX = ":spread"


def spread_column(metric: str) -> str:
    """The per-kernel frame's column of how far ``metric`` moved over a kernel's profiled passes."""
    return f"{metric}{SPREAD_SUFFIX}"


# ncu metrics, verbatim (declared in fuseci.config.quantities).
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DRAM_READ_RATE = "dram__bytes_read.sum.per_second"
DRAM_WRITE_RATE = "dram__bytes_write.sum.per_second"
DRAM_PCT_PEAK = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
DURATION = "gpu__time_duration.sum"
OCC_ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"
OCC_THEORETICAL = "sm__maximum_warps_per_active_cycle_pct"
L2_WRITE_SECTORS = "lts__t_sectors_srcunit_tex_op_write.sum"
#: What the SMs ask of memory and execute, counted exactly (docs/BENCHMARKS.md, "Exact counters").
L2_READ_SECTORS = "lts__t_sectors_srcunit_tex_op_read.sum"
GLOBAL_LOAD_BYTES = "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"
GLOBAL_STORE_BYTES = "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum"
#: What Hopper's tensor memory accelerator (TMA) moves between L2 and the SMs, bypassing the LSU pipe.
TMA_LOAD_BYTES = "l1tex__m_xbar2l1tex_read_bytes_pipe_tma.sum"
TMA_STORE_BYTES = "l1tex__m_l1tex2xbar_write_bytes_mem_global_op_tma_st.sum"
INSTRUCTIONS = "smsp__inst_executed.sum"
GRID_SIZE = "launch__grid_size"
BLOCK_SIZE = "launch__block_size"
REGISTERS = "launch__registers_per_thread"
REPLAY_PASSES = "profiler__replayer_passes"
SHARED_MEM_STATIC = "launch__shared_mem_per_block_static"
SHARED_MEM_DYNAMIC = "launch__shared_mem_per_block_dynamic"
#: Blocks per SM each resource allows the launch (the smallest is what limits occupancy).
LIMIT_BLOCKS = "launch__occupancy_limit_blocks"
LIMIT_REGISTERS = "launch__occupancy_limit_registers"
LIMIT_SHARED_MEM = "launch__occupancy_limit_shared_mem"
LIMIT_WARPS = "launch__occupancy_limit_warps"
#: What each occupancy limit means for people, in the order they are named.
OCCUPANCY_LIMITERS: dict[str, str] = {
    LIMIT_REGISTERS: "registers",
    LIMIT_SHARED_MEM: "shared memory",
    LIMIT_WARPS: "block size",
    LIMIT_BLOCKS: "blocks per SM",
}

#: Device attribute ncu stores with every kernel; used to cross-check the harness record.
DEVICE_NAME = "device__attribute_display_name"

# Per-variant quantities derived by aggregation (metrics.py).
LAUNCHES = "launches"
DRAM_BYTES = "dram__bytes.sum"
L2_WRITE_BYTES = "lts__t_bytes_srcunit_tex_op_write.sum"
L2_READ_BYTES = "lts__t_bytes_srcunit_tex_op_read.sum"

# Per-variant quantities from the harness, outside ncu.
EVENT_TIME = "event_time"
"""Median wall time of one call between two CUDA events, ns, measured without ncu."""
EVENT_TIME_IQR = "event_time.iqr"
"""Interquartile range of the timed calls, ns."""
EVENT_TIME_REPEATS = "event_time.repeats"
"""Timed calls behind the median."""
EVENT_TIME_Q1 = "event_time.q1"
"""25th percentile of the timed calls, ns."""
EVENT_TIME_Q3 = "event_time.q3"
"""75th percentile of the timed calls, ns."""
EVENT_TIME_MIN = "event_time.min"
"""Fastest timed call, ns."""
EVENT_TIME_MAX = "event_time.max"
"""Slowest timed call, ns."""
HOST_TIME = "host_time"
"""Median wall time, ns, from a call's start to its return on the host, with the GPU still busy."""
HOST_BLOCKING = "host_blocking"
"""Fraction of probe calls that returned only after earlier GPU work had finished (0: never
waits for the GPU; 1: synchronises every time)."""
MIN_BYTES = "min_bytes"
"""Fewest DRAM bytes the case can move: every input read once, every output written once."""
BYTES_RATIO = "dram_bytes_over_min"
"""DRAM bytes moved ÷ :data:`MIN_BYTES`: 1.0 moves nothing twice; above it, re-reads or spills."""

DRAM_PEAK = "dram_peak_bytes_per_second"
"""Informational environment field (never part of the fingerprint): the card's peak DRAM
bandwidth in bytes/s as ncu's :data:`DRAM_PCT_PEAK` implies it."""


#: Fingerprint fields of the array frameworks a suite's functions use, present only where a suite
#: uses them: a suite of CuPy kernels is not made incomparable by a PyTorch upgrade.
FRAMEWORK_ENV_FIELDS: tuple[str, ...] = ("torch_version", "triton_version")

ENV_FIELDS: tuple[str, ...] = (
    "gpu_name",
    "compute_capability",
    "driver_version",
    "cuda_runtime",
    "cupy_version",
    "ncu_version",
    "clock_control",
    "cache_control",
    "replay_mode",
    *FRAMEWORK_ENV_FIELDS,
)
"""Environment fingerprint: a baseline recorded under different values is not compared silently."""


def gpu_slug(gpu_name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` → ``nvidia-h100-80gb-hbm3``: the GPU model's directory name."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")
    return slug or "unknown-gpu"
