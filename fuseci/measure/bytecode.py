"""Python bytecode for fuseci's own processes on machines that keep none.

CI images often switch bytecode writing off (``PYTHONDONTWRITEBYTECODE``) over a site-packages
that holds no ``.pyc`` files: every process then compiles what it imports from source. The
harness processes keep their bytecode under the compile cache (``PYTHONPYCACHEPREFIX``, see
:attr:`fuseci.measure.run.MeasureOptions.env`); :func:`keep` does the same for the process that
runs ``fuseci run``, ``fuseci ab`` or ``update-baselines``, whose imports (pandas, the report
reader) came to 1.2 s on an H200 machine without bytecode and 0.6 s with it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The directory in the report directory that holds the compilers' caches and the bytecode.
COMPILE_CACHE = "compile-cache"
#: The directory under the compile cache (``<report-dir>/compile-cache``) that holds the bytecode.
PYCACHE = "python"


def keep(report_dir: Path) -> bool:
    """Keep this process's bytecode under the compile cache of ``report_dir``
    (:data:`COMPILE_CACHE`/:data:`PYCACHE`) from now on, when it
    writes none and ``PYTHONPYCACHEPREFIX`` names no place of the user's; what it writes lands
    there only, never beside the sources. Whether it now does."""
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None or os.environ.get("PYTHONPYCACHEPREFIX"):
        return False
    sys.pycache_prefix = str((report_dir / COMPILE_CACHE / PYCACHE).absolute())
    sys.dont_write_bytecode = False
    return True
