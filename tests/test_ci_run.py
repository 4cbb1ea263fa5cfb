"""``.ci/run``, the CI entry point, run with stand-ins for the tools it calls: it leaves nothing
behind in the temporary directory, whether the tests pass, fail or it is interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import ROOT

#: Each stand-in logs its arguments; ``python`` plays pytest's part, exiting with $STUB_RC.
STUBS = {
    "python3": """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin"
    head -c 1048576 /dev/zero > "$3/bin/payload"   # something to leave behind
    printf 'export PATH="%s:$PATH"\\n' "$STUB_VENV_BIN" > "$3/bin/activate"
    exit 0
fi
exit 0
""",
    "npm": "#!/bin/sh\nexit 0\n",
    "chromium": "#!/bin/sh\nexit 0\n",
}
VENV_STUBS = {
    "python": """#!/bin/sh
if [ "$2" = "pytest" ]; then
    [ -n "$STUB_SLEEP" ] && sleep "$STUB_SLEEP"
    exit "${STUB_RC:-0}"
fi
exit 0
""",
    "fuseci": "#!/bin/sh\necho fuseci 0\n",
}


def _stubs(directory: Path, scripts: dict[str, str]) -> Path:
    directory.mkdir()
    for name, text in scripts.items():
        (directory / name).write_text(text)
        (directory / name).chmod(0o755)
    return directory


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    bin_ = _stubs(tmp_path / "bin", STUBS)
    venv_bin = _stubs(tmp_path / "venv-bin", VENV_STUBS)
    return {
        "PATH": f"{bin_}:/usr/bin:/bin",
        "TMPDIR": str(tmp),
        "STUB_VENV_BIN": str(venv_bin),
        "FUSECI_SCREENSHOT_DIR": str(tmp_path / "shots"),
        "HOME": str(tmp_path),
    }


@pytest.mark.parametrize("rc", [0, 1])
def test_the_virtual_environment_is_removed_when_the_tests_end(env: dict[str, str], rc: int) -> None:
    # It was left in /tmp after every run (693 MB each).
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")], env={**env, "STUB_RC": str(rc)}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == rc, done.stderr
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_the_virtual_environment_is_removed_when_the_run_is_stopped(env: dict[str, str]) -> None:
    proc = subprocess.Popen(
        ["bash", str(ROOT / ".ci" / "run")], env={**env, "STUB_SLEEP": "30"}, start_new_session=True
    )
    tmp = Path(env["TMPDIR"])
    deadline = time.monotonic() + 20
    while not any(tmp.rglob("payload")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(tmp.rglob("payload")), "the run never made its virtual environment"
    os.killpg(proc.pid, signal.SIGTERM)  # as CI cancels a job: the whole group
    assert proc.wait(timeout=20) != 0
    assert list(tmp.iterdir()) == []
