"""Where the compilers' caches and Python's bytecode live, and the environment that puts them
there: one layout for every process fuseci starts and for fuseci's own, under the report
directory (``fuseci ab``: the one above both sides', shared by them)::

    <report-dir>/compile-cache/        COMPILE_CACHE: kept across runs by a CI cache
        inductor/                      TORCHINDUCTOR_CACHE_DIR (torch.compile)
        triton/                        TRITON_CACHE_DIR
        python/                        PYTHONPYCACHEPREFIX: bytecode (PYCACHE)
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
#: in the process itself, without a pool of workers that each import PyTorch again (under ncu too).
HARNESS_ENV_DEFAULTS: dict[str, str] = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
#: Where compilers keep their caches, wherever they are: read while a case is checked, never the
#: tree's code (:func:`fuseci.harness.watch.start_if_asked` leaves them out).
CACHE_ENVS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CUPY_CACHE_DIR", "NUMBA_CACHE_DIR")


def compile_cache(root: Path) -> Path:
    """The compile cache of the report directory ``root``."""
    return root / COMPILE_CACHE


def harness_env(cache: Path) -> dict[str, str]:
    """What the harness processes' environment adds to put the compilers' caches and the bytecode
    under ``cache`` (:func:`compile_cache`), each only where the user's environment sets none."""
    caches = {var: str((cache / sub).absolute()) for var, sub in COMPILE_CACHES.items()}
    extra = {var: value for var, value in {**caches, **HARNESS_ENV_DEFAULTS}.items() if not os.environ.get(var)}
    if not os.environ.get("PYTHONPYCACHEPREFIX"):
        # Bytecode writing is often off in CI images: kept under the cache, it never lands in
        # site-packages or the user's tree, so writing it is switched back on.
        extra["PYTHONPYCACHEPREFIX"] = str((cache / PYCACHE).absolute())
        extra["PYTHONDONTWRITEBYTECODE"] = ""  # an empty value lets Python write (under the prefix only)
    return extra


def keep(report_dir: Path) -> bool:
    """Keep this process's bytecode under the compile cache of ``report_dir`` from now on, when it
    writes none and ``PYTHONPYCACHEPREFIX`` names no place of the user's. Whether it now does."""
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None or os.environ.get("PYTHONPYCACHEPREFIX"):
        return False
    sys.pycache_prefix = str((compile_cache(report_dir) / PYCACHE).absolute())
    sys.dont_write_bytecode = False
    return True
