import os
import stat
from pathlib import Path

from fuseci.store.atomic import atomic_write_text


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
