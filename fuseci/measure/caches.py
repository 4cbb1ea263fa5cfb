"""Where the compilers' caches and Python's bytecode live, and the environment that puts them
there: one layout for every process fuseci starts and for fuseci's own.

The layout, under the report directory (``--report-dir``; ``fuseci ab``: the one above both
sides', shared by them, since compiled code is keyed by its source)::

    <report-dir>/compile-cache/        COMPILE_CACHE: kept across runs by a CI cache
        inductor/                      TORCHINDUCTOR_CACHE_DIR (torch.compile)
        triton/                        TRITON_CACHE_DIR
        python/                        PYTHONPYCACHEPREFIX: bytecode (PYCACHE)

The harness processes get these variables (:func:`harness_env`) unless the user's environment
sets them: the timed process finds what the profiled one compiled, and the next run what this
one did. CuPy's and Numba's caches stay where their users put them; the audit of ``fuseci ab``
leaves every compiler's cache out of what a case read (:data:`CACHE_ENVS`).

CI images often switch bytecode writing off (``PYTHONDONTWRITEBYTECODE``) over a site-packages
that holds no ``.pyc`` files: every process then compiles what it imports from source. The
harness processes keep their bytecode under the compile cache (``PYTHONPYCACHEPREFIX``);
:func:`keep` does the same for the process that runs ``fuseci run``, ``fuseci ab`` or
``update-baselines``, whose imports (pandas, the report reader) came to 1.2 s on an H200 machine
without bytecode and 0.6 s with it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The directory in the report directory that holds the compilers' caches and the bytecode.
COMPILE_CACHE = "compile-cache"
#: The directory under the compile cache (``<report-dir>/compile-cache``) that holds the bytecode.
PYCACHE = "python"
#: The compilers' cache directories, by environment variable, under the compile cache.
COMPILE_CACHES: dict[str, str] = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}
#: What else the harness processes' environment holds unless the user's sets it: Inductor compiles
#: in the process itself, without a pool of worker processes that each import PyTorch again (and
#: run under ncu in the profiled run): with its cache warm there is little to compile, and a one-case
#: torch.compile suite took 17-21 s instead of 25 s on an H200 (docs/BENCHMARKS.md).
HARNESS_ENV_DEFAULTS: dict[str, str] = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
#: Where compilers keep their caches, wherever they are: read while a case is checked, never the
#: tree's code (:func:`fuseci.harness.watch.start_if_asked` leaves them out).
CACHE_ENVS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CUPY_CACHE_DIR", "NUMBA_CACHE_DIR")


def compile_cache(root: Path) -> Path:
    """The compile cache of the report directory ``root``."""
    return root / COMPILE_CACHE


def harness_env(cache: Path) -> dict[str, str]:
    """What the harness processes' environment adds to put the compilers' caches and the
    bytecode under ``cache`` (:func:`compile_cache`), each only where the user's environment
    sets no value of its own."""
    extra: dict[str, str] = {}
    for var, sub in COMPILE_CACHES.items():
        if not os.environ.get(var):
            extra[var] = str((cache / sub).absolute())
    for var, value in HARNESS_ENV_DEFAULTS.items():
        if not os.environ.get(var):
            extra[var] = value
    if not os.environ.get("PYTHONPYCACHEPREFIX"):
        # With bytecode writing off (``PYTHONDONTWRITEBYTECODE``, common in CI images) or a
        # read-only site-packages without ``.pyc`` files, Python compiled PyTorch's 2,000 modules
        # from source in both processes of every run (``import torch`` and Inductor: 11.7 s on an
        # H200). Kept under the cache, the bytecode never lands in site-packages or the user's
        # tree, so writing it is switched back on.
        extra["PYTHONPYCACHEPREFIX"] = str((cache / PYCACHE).absolute())
        extra["PYTHONDONTWRITEBYTECODE"] = ""  # an empty value lets Python write (under the prefix only)
    return extra


def keep(report_dir: Path) -> bool:
    """Keep this process's bytecode under the compile cache of ``report_dir``
    (:data:`COMPILE_CACHE`/:data:`PYCACHE`) from now on, when it
    writes none and ``PYTHONPYCACHEPREFIX`` names no place of the user's; what it writes lands
    there only, never beside the sources. Whether it now does."""
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None or os.environ.get("PYTHONPYCACHEPREFIX"):
        return False
    sys.pycache_prefix = str((compile_cache(report_dir) / PYCACHE).absolute())
    sys.dont_write_bytecode = False
    return True
