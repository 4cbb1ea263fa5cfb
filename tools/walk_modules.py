"""Which fuseci modules a command's walk crosses in its own process: every module one of whose
named functions or methods runs from the moment the CLI is imported to its exit code, in every
thread, under ``sys.setprofile`` (module and class bodies and the comprehensions and lambdas they
run are left out: an import alone does not count).

    python tools/walk_modules.py run suites/elementwise.yaml --from-report tests/data/reports/elementwise.ncu-rep.xz
"""

import inspect
import sys
import threading
from pathlib import Path
from types import FrameType

import fuseci

PACKAGE = str(Path(fuseci.__file__).parent)
crossed: set[str] = set()


def _heard(frame: FrameType, event: str, arg: object) -> None:
    code = frame.f_code
    named = code.co_flags & inspect.CO_OPTIMIZED and not code.co_name.startswith("<")
    if event == "call" and named and code.co_filename.startswith(PACKAGE):
        crossed.add(frame.f_globals["__name__"])


sys.setprofile(_heard)
threading.setprofile(_heard)
from fuseci.cli import main  # noqa: E402

sys.argv = ["fuseci", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    sys.setprofile(None)
    print(f"exit {exc.code}: {len(crossed)} modules", *sorted(crossed), sep="\n", file=sys.stderr)
