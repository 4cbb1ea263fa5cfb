"""What a case's checked calls ran and read of a tree (fuseci.harness.watch), on the CPU: a
function of a temporary tree run under the watch."""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import pytest
from helpers import write

from fuseci.harness import watch
from fuseci.records.harness import CaseRecord, CaseStatus

_A = """import json
from pathlib import Path

_HERE = Path(__file__).parent


def helper(x):
    return x + 1


def f(x):
    from pkg import lazy

    (_HERE / "out.txt").write_text("written, not read")
    data = (_HERE / "data.txt").read_text()
    json.dumps([x])
    return lazy.g(helper(x)) + len(data)


def in_thread(out):
    t = __import__("threading").Thread(target=lambda: out.append(__import__("pkg.lazy").lazy.g(1)))
    t.start()
    t.join()
"""


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tree"
    write(root / "pkg" / "__init__.py", "")
    write(root / "pkg" / "a.py", _A)
    write(root / "pkg" / "lazy.py", "X = 1\n\n\ndef g(x):\n    return x * 2\n\n\nclass Unused:\n    Y = [X]\n")
    write(root / "pkg" / "data.txt", "abc")
    write(root / "outputs" / "record.json", "{}")
    monkeypatch.syspath_prepend(str(root))
    for name in ("pkg", "pkg.a", "pkg.lazy"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return root


def test_a_checked_call_notes_the_tree_files_that_ran_and_were_read(tree: Path) -> None:
    w = watch.Watch(tree, [tree / "outputs"])
    with w.importing("pkg.a"):
        module = importlib.import_module("pkg.a")
    # importing ran the package's and the module's own code, and read their source or byte code
    assert set(w.imported["pkg.a"].ran) == {"pkg/__init__.py", "pkg/a.py"}
    assert w.imported["pkg.a"].ran["pkg/a.py"] == {0}
    before = sys.gettrace(), sys.getprofile()
    with w.checking("c", ["pkg.a"]):
        assert module.f(1) == 7
    assert (sys.gettrace(), sys.getprofile()) == before
    seen = w.cases["c"]
    # f and helper of pkg/a.py (their first lines), the lazily imported module's code and g;
    # json and pathlib ran too, but they are not the tree's
    # a class body runs when its module is imported, as the module's own code does: noted as 0
    assert seen.ran == {"pkg/__init__.py": {0}, "pkg/a.py": {0, 7, 11}, "pkg/lazy.py": {0, 4}}
    # data.txt was read and out.txt only written; lazy.py's source (or byte code) was read by its import
    assert "pkg/data.txt" in seen.read and "pkg/out.txt" not in seen.read and "pkg/lazy.py" in seen.read
    assert not any(p.startswith(("outputs", "/")) for p in [*seen.ran, *seen.read])


def test_each_watch_sees_again_what_an_earlier_one_saw_and_nothing_outside_one(tree: Path) -> None:
    w = watch.Watch(tree)
    module = importlib.import_module("pkg.a")
    for case in ("c1", "c2"):
        with w.checking(case, []):
            module.helper(1)
        assert w.cases[case].ran == {"pkg/a.py": {7}}
    module.f(1)  # unwatched: noted nowhere
    assert set(w.cases) == {"c1", "c2"} and w.cases["c2"].ran == {"pkg/a.py": {7}}


def test_a_thread_started_by_a_checked_call_is_watched(tree: Path) -> None:
    w = watch.Watch(tree)
    module = importlib.import_module("pkg.a")
    out: list[int] = []
    with w.checking("c", []):
        module.in_thread(out)
    assert out == [2] and 4 in w.cases["c"].ran["pkg/lazy.py"]
    assert threading.gettrace() is None


def test_fuseci_itself_and_the_interpreters_files_are_not_the_trees(tmp_path: Path) -> None:
    """A tree that holds fuseci (a pull request to fuseci itself) or a virtual environment:
    neither is the suite's code."""
    files = watch._Files(Path(watch.__file__).parents[2], [])
    assert files.relative(watch.__file__) is None
    assert (
        files.relative(str(Path(watch.__file__).parents[2] / "kernels" / "elementwise.py")) == "kernels/elementwise.py"
    )
    assert files.relative("<string>") is None
    assert watch._source_of(Path("pkg/__pycache__/a.cpython-312.pyc")) == Path("pkg/a.py")


def test_the_record_carries_what_was_noted_only_when_watched(tree: Path) -> None:
    record = CaseRecord("c", CaseStatus.OK)
    assert watch.noted(record) is record  # no watch started: the record as it was
    started = watch.start(tree)
    try:
        module = importlib.import_module("pkg.a")
        with watch.checking("c", []):
            module.helper(1)
        got = watch.noted(record)
        assert got.ran == {"pkg/a.py": (7,)} and got.read == ()
        assert watch.noted(CaseRecord("other", CaseStatus.OK)).ran == {}
        assert started.cases["c"].ran == {"pkg/a.py": {7}}
    finally:
        watch._watch = None


def test_the_harness_watches_only_under_fuseci_ab(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FUSECI_AUDIT_TREE", raising=False)
    assert watch.start_if_asked(tree / "outputs") is None
    monkeypatch.setenv("FUSECI_AUDIT_TREE", str(tree))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tree / "cache"))
    try:
        started = watch.start_if_asked(tree / "outputs")
        assert started is not None
        assert started.files.relative(str(tree / "cache" / "k.json")) is None
        assert started.files.relative(str(tree / "outputs" / "record.json")) is None
        assert started.files.relative(str(tree / "pkg" / "a.py")) == "pkg/a.py"
    finally:
        watch._watch = None


def test_the_bytecode_prefix_is_left_out(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PYTHONPYCACHEPREFIX inside the tree (the Action keeps it under the report directory): the
    byte code read from there is the byte code of sources whose running is noted, never a file
    the fingerprint must cover (a user's pull request failed on it in a rehearsal)."""
    monkeypatch.setenv("FUSECI_AUDIT_TREE", str(tree))
    monkeypatch.setattr("sys.pycache_prefix", str(tree / "fuseci-out" / "compile-cache" / "python"))
    try:
        started = watch.start_if_asked(tree / "outputs")
        assert started is not None
        pyc = tree / "fuseci-out" / "compile-cache" / "python" / "opt" / "venv" / "triton" / "x.cpython-312.pyc"
        assert started.files.relative(str(pyc)) is None
        assert started.files.relative(str(tree / "pkg" / "a.py")) == "pkg/a.py"
    finally:
        watch._watch = None


def test_a_name_that_is_no_file_is_not_noted(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An editable install puts a name like ``__editable__.fuseci-0.1.0.finder.__path_hook__`` on
    sys.path; the import system tries to open it relative to the working directory (the tree), and
    the open fails: nothing was read, so nothing is noted (every PyTorch case read it on a GPU)."""
    monkeypatch.chdir(tree)
    w = watch.Watch(tree, [tree / "outputs"])
    with w.checking("c", ()):
        for name in ("__editable__.fuseci-0.1.0.finder.__path_hook__", "pkg/missing.txt"):
            with pytest.raises(OSError):
                open(name)  # noqa: SIM115
        (tree / "pkg" / "data.txt").read_text()
    assert w.cases["c"].read == {"pkg/data.txt"}
