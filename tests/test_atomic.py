import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

from helpers import CLEAN_REPORT, ELEMENTWISE, H200_BASELINES, REGRESSED_REPORT, ROOT, write

from fuseci import api
from fuseci.config.parse import load_suite
from fuseci.files.atomic import STALE_TEMPORARY_S, atomic_write_text


def test_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a" / "f.json", "x\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "f.json").stat().st_mode) == 0o644


def test_replacement_keeps_the_old_mode_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_text("old\n")
    path.chmod(0o640)
    atomic_write_text(path, "new\n")
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


# --- leftovers: temporary files of killed writers, and no lock files ----------------------------

KILLED_UPDATE = r"""
import os, sys
from pathlib import Path
from fuseci import api
from fuseci.config.parse import load_suite

suite, report, root = sys.argv[1:]
os.replace = lambda *a, **k: os._exit(9)  # killed between writing the temporary file and renaming it
api.update_baselines(load_suite(Path(suite)), api.RunOptions(baselines=Path(root), from_report=Path(report)))
"""


def test_a_killed_update_leaves_a_temporary_file_that_the_next_one_removes(tmp_path: Path, relaxed) -> None:
    root = tmp_path / "baselines"
    shutil.copytree(H200_BASELINES, root)
    baseline = root / "nvidia-h200" / "elementwise.json"
    before = baseline.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", KILLED_UPDATE, str(relaxed.path), str(REGRESSED_REPORT), str(root)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 9, done.stderr
    (left,) = [p.name for p in baseline.parent.iterdir() if p.name.startswith(".")]
    assert left.startswith(".elementwise.json.") and left.endswith(".tmp") and baseline.read_bytes() == before
    elsewhere = write(root / "nvidia-h200" / ".notes.txt.abcdefgh.tmp", "not ours")
    update = api.update_baselines(relaxed, api.RunOptions(baselines=root, from_report=REGRESSED_REPORT))
    assert update.written
    assert sorted(p.name for p in baseline.parent.iterdir() if p.name.startswith(".")) == [elsewhere.name]


def test_atomic_writes_sweep_only_stale_temporaries_of_their_file(tmp_path: Path) -> None:
    path = tmp_path / "j.xml"
    stale = write(tmp_path / ".j.xml.abcd1234.tmp", "old")
    fresh = write(tmp_path / ".j.xml.efgh5678.tmp", "being written")
    other = write(tmp_path / ".k.xml.abcd1234.tmp", "another file's")
    hour_ago = time.time() - STALE_TEMPORARY_S - 60
    os.utime(stale, (hour_ago, hour_ago))
    os.utime(other, (hour_ago, hour_ago))
    atomic_write_text(path, "x\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["j.xml", fresh.name, other.name])


def test_no_update_leaves_anything_in_the_tree(tmp_path: Path) -> None:
    root = tmp_path / "baselines"
    shutil.copytree(H200_BASELINES, root)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    for report in (REGRESSED_REPORT, CLEAN_REPORT):
        api.update_baselines(load_suite(ELEMENTWISE), api.RunOptions(baselines=root, from_report=report))
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # no lock, no temporary file


#: One of several processes taking a lock file in turn: each turn creates a marker that must not
#: exist (another process inside) and counts itself.
CONTENDER = r"""
import os, sys
from pathlib import Path
from fuseci.files.locks import file_lock

lock, turns = Path(sys.argv[1]), int(sys.argv[2])
inside, count = lock.with_name("inside"), lock.with_name("count")
for _ in range(turns):
    with file_lock(lock, 60, 0.001, 0.001):
        os.close(os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        count.write_text(str(int(count.read_text()) + 1 if count.exists() else 1))
        os.unlink(inside)
"""


def test_a_lock_file_admits_one_holder_at_a_time(tmp_path: Path) -> None:
    """Each holder removes the lock file as it lets go, so a waiter may lock a file that no longer
    has its name: it must try again on the name, never hold the lock beside the next holder."""
    lock = tmp_path / "fuseci-gpu-0.lock"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", CONTENDER, str(lock), "40"], env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert (tmp_path / "count").read_text() == "160"
    assert [p.name for p in tmp_path.iterdir()] == ["count"]  # no lock file left
