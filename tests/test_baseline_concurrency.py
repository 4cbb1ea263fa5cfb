"""Concurrent ``update-baselines`` of one suite and GPU, with real processes.

The update lock (``fuseci.store.baselines.locked``) must serialise the read-compare-write, so that the
second update builds on the first's file instead of silently overwriting it, and ``fuseci run``
must never need the lock.
"""

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, H200_BASELINES, REGRESSED_REPORT, ROOT
from helpers import snapshot as _snapshot

from fuseci import api
from fuseci.errors import BaselineError
from fuseci.judge.verdict import Verdict, exit_code
from fuseci.store import baselines as bl

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="update locking is POSIX-only")

REPORTS = {"clean": CLEAN_REPORT, "regressed": REGRESSED_REPORT}

#: One ``update-baselines`` in its own process. It waits at a barrier until every updater is at
#: the lock, so that they really contend, and dawdles between reading the old baseline and
#: writing the new one, so that without the lock their read-compare-writes would overlap.
UPDATER = r"""
import json, sys, time
from contextlib import contextmanager
from pathlib import Path
from fuseci import api
from fuseci.store import baselines as bl
from fuseci.config.parse import load_suite

suite_file, report, root, barrier, parties, name, dawdle_s, out = sys.argv[1:]
real_locked, real_load = bl.locked, bl.load_baseline
times = {}

@contextmanager
def traced_locked(path, timeout_s=bl.LOCK_TIMEOUT_S):
    Path(barrier, name).touch()
    while len(list(Path(barrier).iterdir())) < int(parties):
        time.sleep(0.005)
    times["asked"] = time.time()
    with real_locked(path, timeout_s):
        times["acquired"] = time.time()
        try:
            yield
        finally:
            times["released"] = time.time()

def slow_load(path):
    old = real_load(path)
    time.sleep(float(dawdle_s))
    return old

bl.locked, bl.load_baseline = traced_locked, slow_load
options = api.RunOptions(baselines=Path(root), from_report=Path(report))
update = api.update_baselines(load_suite(Path(suite_file)), options, lock_timeout_s=60)
Path(out).write_text(json.dumps({"name": name, "written": update.written, "changes": list(update.changes), **times}))
"""

#: Holds a baseline's update lock: prints ``held``, then keeps it until stdin closes or for the
#: number of seconds given.
HOLDER = r"""
import sys, time
from pathlib import Path
from fuseci.store import baselines as bl

path, hold = sys.argv[1:]
with bl.locked(Path(path)):
    print("held", flush=True)
    if hold == "stdin":
        sys.stdin.readline()
    else:
        time.sleep(float(hold))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _copy_baselines(dest: Path, suite) -> Path:
    """The committed baselines, with elementwise's recorded from the clean report: the committed
    file was recorded from three profiled passes, which the one-pass clean report never equals."""
    shutil.copytree(H200_BASELINES, dest)
    api.update_baselines(suite, api.RunOptions(baselines=dest, from_report=CLEAN_REPORT), force=True)
    return dest / "nvidia-h200" / "elementwise.json"


@pytest.fixture
def committed_copy(tmp_path: Path, relaxed) -> Path:
    return _copy_baselines(tmp_path / "baselines", relaxed)


@pytest.fixture(scope="module")
def after_regressed(tmp_path_factory: pytest.TempPathFactory, elementwise, relaxed) -> bytes:
    """The file one update from the regressed report makes of the committed baseline, alone."""
    path = _copy_baselines(tmp_path_factory.mktemp("alone") / "baselines", relaxed)
    api.update_baselines(relaxed, api.RunOptions(baselines=path.parent.parent, from_report=REGRESSED_REPORT))
    return path.read_bytes()


def _race(tmp_path: Path, root: Path, reports: list[str], dawdle_s: float, suite: Path) -> list[dict]:
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = []
    for i, report in enumerate(reports):
        out = tmp_path / f"updater-{i}.json"
        argv = [suite, REPORTS[report], root, barrier, len(reports), f"{i}-{report}", dawdle_s, out]
        procs.append(
            (
                out,
                subprocess.Popen(
                    [sys.executable, "-c", UPDATER, *map(str, argv)], env=_env(), stderr=subprocess.PIPE, text=True
                ),
            )
        )
    runs = []
    for out, proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        runs.append(json.loads(out.read_text()))
    return sorted(runs, key=lambda r: r["acquired"])


@pytest.mark.parametrize("reports", [["clean", "regressed"], ["regressed", "clean", "regressed"]])
def test_concurrent_updates_are_serialised_and_none_is_lost(
    tmp_path: Path, elementwise, relaxed, committed_copy: Path, after_regressed: bytes, reports: list[str]
) -> None:
    root = committed_copy.parent.parent
    original = committed_copy.read_bytes()
    others = {k: v for k, v in _snapshot(root).items() if k != "nvidia-h200/elementwise.json"}
    dawdle = 0.3
    runs = _race(tmp_path, root, reports, dawdle, relaxed.path)

    for first, second in itertools.pairwise(runs):  # one at a time, and each waited for the one before
        assert first["released"] <= second["acquired"]
    assert runs[-1]["acquired"] - runs[-1]["asked"] >= dawdle * (len(runs) - 1) * 0.9
    # Each update saw the file its predecessor left: replaying them in lock order must give
    # the same decisions. The clean report matches the committed file, the regressed report
    # the file it makes of it.
    state = "clean"
    for run in runs:
        report = run["name"].split("-", 1)[1]
        assert run["written"] == (report != state), runs
        if run["written"]:
            assert len(run["changes"]) == 1 and run["changes"][0].startswith("~ scale_relu_add: "), run
        state = report
    final = committed_copy.read_bytes()
    assert final == (original if state == "clean" else after_regressed)
    assert bl.load_baseline(committed_copy) is not None  # one whole file, valid JSON
    # Nothing else was touched, and no temporary or lock file is left (the directory is the lock).
    assert {k: v for k, v in _snapshot(root).items() if k != "nvidia-h200/elementwise.json"} == others
    # ... and none of it gets in the way of later runs and updates.
    options = api.RunOptions(baselines=root, from_report=CLEAN_REPORT)
    checked = api.check(elementwise, options)
    if state == "clean":
        assert checked.verdict is Verdict.PASS
    else:  # the fusion is whole again: its gains rose and its bytes fell (judged across other kernels)
        found = {k.verdict for case in checked.cases for k in case.checks if k.verdict is not Verdict.PASS}
        assert found == {Verdict.IMPROVED} and checked.verdict is Verdict.IMPROVED, found
        assert exit_code([checked]) == 0
    assert api.update_baselines(relaxed, options, lock_timeout_s=1).written == (state != "clean")
    assert committed_copy.read_bytes() == original


def _hold(path: Path, hold: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), hold],
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_held_lock_times_out_with_who_holds_it(tmp_path: Path, elementwise, relaxed, committed_copy: Path) -> None:
    before = committed_copy.read_bytes()
    options = api.RunOptions(baselines=committed_copy.parent.parent, from_report=REGRESSED_REPORT)
    holder = _hold(committed_copy, "stdin")
    try:
        started = time.monotonic()
        with pytest.raises(BaselineError) as info:
            api.update_baselines(relaxed, options, lock_timeout_s=0.5)
        assert time.monotonic() - started >= 0.5
        message = str(info.value)
        assert message.startswith(
            f"{committed_copy}: gave up after 0.5 s waiting for the update lock of {committed_copy.parent}"
        )
        if Path("/proc/locks").exists():  # Linux names the holder
            assert f"held by pid {holder.pid} on " in message and "python" in message
        assert "another `fuseci update-baselines` is updating this card's baselines; let it finish" in message
        assert committed_copy.read_bytes() == before
        # `fuseci run` only reads: the lock does not concern it.
        started = time.monotonic()
        assert api.check(elementwise, options).verdict is Verdict.REGRESSED
        assert time.monotonic() - started < 5
    finally:
        holder.communicate("\n", timeout=30)
    assert api.update_baselines(relaxed, options, lock_timeout_s=0.5).written


def test_held_lock_makes_the_update_wait_then_proceed(
    tmp_path: Path, elementwise, relaxed, committed_copy: Path, caplog: pytest.LogCaptureFixture
) -> None:
    options = api.RunOptions(baselines=committed_copy.parent.parent, from_report=REGRESSED_REPORT)
    holder = _hold(committed_copy, "0.8")
    started = time.monotonic()
    update = api.update_baselines(relaxed, options, lock_timeout_s=30)
    waited = time.monotonic() - started
    holder.communicate(timeout=30)
    assert update.written and waited >= 0.4
    # The wait is announced (at warning level: the CLI shows it), so it does not look like a hang.
    assert f"{committed_copy.parent} is held by " in caplog.text
    if Path("/proc/locks").exists():
        assert f"is held by pid {holder.pid} on " in caplog.text
    assert "waiting up to 30 s" in caplog.text


def test_lock_of_a_killed_holder_does_not_block(tmp_path: Path, elementwise, relaxed, committed_copy: Path) -> None:
    before = _snapshot(committed_copy.parent)
    holder = _hold(committed_copy, "stdin")
    holder.kill()
    holder.communicate(timeout=30)
    assert _snapshot(committed_copy.parent) == before  # it had no time to tidy up, and needs none
    options = api.RunOptions(baselines=committed_copy.parent.parent, from_report=REGRESSED_REPORT)
    assert api.update_baselines(relaxed, options, lock_timeout_s=0.5).written
