"""``fuseci ab`` without a GPU: the temporary worktrees, the fingerprint that skips unchanged
suites, which tree a side's processes import from, the order of the measurements, and the
judging of a head against a base from recorded reports (only the measuring step is faked)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, REGRESSED_REPORT, REPORTS, ROOT, measure_with, write
from helpers import git as _git
from typer.testing import CliRunner

from fuseci import __version__, api
from fuseci.ab import git
from fuseci.ab.fingerprint import Fingerprint, differences, fingerprint
from fuseci.api import ab, session
from fuseci.cli.commands import app
from fuseci.config.parse import load_suite
from fuseci.errors import Cancelled, FuseciError, NcuError
from fuseci.frames.metrics import SuiteResults, summarize
from fuseci.judge.verdict import CheckKind, Verdict, exit_code
from fuseci.measure import process
from fuseci.measure.run import MeasureOptions, measure

runner = CliRunner()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository holding the shipped elementwise and stencil suites and every kernel module."""
    r = tmp_path / "repo"
    (r / "suites").mkdir(parents=True)
    for name in ("elementwise", "stencil"):
        shutil.copy(ROOT / "suites" / f"{name}.yaml", r / "suites")
    shutil.copytree(ROOT / "kernels", r / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    _git(r, "init", "-q", "-b", "main")
    _commit(r, "first")
    return r


def _worktrees(repo: Path) -> list[str]:
    return [line for line in _git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


# --- the worktrees -------------------------------------------------------------------------------


def test_the_base_is_a_temporary_worktree_of_its_commit_removed_afterwards(repo: Path) -> None:
    first = _git(repo, "rev-parse", "HEAD")
    write(repo / "kernels" / "stencil.py", "# changed and committed\n")
    _commit(repo, "second")
    (repo / "kernels" / "elementwise.py").write_text("# uncommitted\n")
    with ab.trees(first, None, repo / "suites") as (root, base, head):
        assert root == Path(os.path.realpath(repo))
        assert base.commit == first and base.label == f"base {first[:7]}"
        assert base.root.is_relative_to(Path(os.path.realpath(tempfile.gettempdir())))
        assert (base.root / "kernels" / "stencil.py").read_text() == (ROOT / "kernels" / "stencil.py").read_text()
        # the head is the working tree as it is, uncommitted changes included
        assert head.root == root and head.commit is None and head.label == "the working tree"
        assert (head.root / "kernels" / "elementwise.py").read_text() == "# uncommitted\n"
        assert len(_worktrees(repo)) == 2
        held = base.root
    assert not held.exists() and not held.parent.exists()
    assert len(_worktrees(repo)) == 1


def test_a_head_ref_is_a_second_worktree(repo: Path) -> None:
    first = _git(repo, "rev-parse", "HEAD")
    write(repo / "kernels" / "stencil.py", "# second\n")
    second = _commit(repo, "second")
    (repo / "kernels" / "stencil.py").write_text("# uncommitted\n")
    with ab.trees(first, "HEAD", repo) as (_, base, head):
        assert head.commit == second and head.label == f"head {second[:7]}" and head.root != repo
        assert (head.root / "kernels" / "stencil.py").read_text() == "# second\n"
        assert base.root != head.root and len(_worktrees(repo)) == 3
    assert len(_worktrees(repo)) == 1


@pytest.mark.parametrize("failure", [RuntimeError("a bug"), KeyboardInterrupt(), Cancelled(15)])
def test_worktrees_are_removed_however_the_block_ends(repo: Path, failure: BaseException) -> None:
    held: list[Path] = []
    with pytest.raises(type(failure)), ab.trees("HEAD", "HEAD", repo) as (_, base, head):
        held += [base.root, head.root]
        raise failure
    assert held and not any(p.exists() for p in held)
    assert len(_worktrees(repo)) == 1


def test_a_killed_runs_registration_is_pruned_by_the_next(repo: Path) -> None:
    gone = Path(tempfile.mkdtemp()) / "tree"
    _git(repo, "worktree", "add", "--detach", "-q", str(gone), "HEAD")
    shutil.rmtree(gone.parent)  # as a run killed with SIGKILL leaves it: registered, directory gone
    assert len(_worktrees(repo)) == 2
    with ab.trees("HEAD", None, repo):
        pass
    assert len(_worktrees(repo)) == 1


def _left_by_a_killed_run(repo: Path, *, locked: bool) -> Path:
    """A worktree as ``fuseci ab`` makes it, its process gone (killed with SIGKILL): registered,
    its directory still there, and with ``locked`` the lock ``git worktree add`` holds while it
    checks out (killed during the checkout)."""
    tree = Path(tempfile.mkdtemp(prefix=git.WORKTREE_PREFIX)) / "tree"
    _git(repo, "worktree", "add", "--detach", "-q", str(tree), "HEAD")
    if locked:
        _git(repo, "worktree", "lock", "--reason", "initializing", str(tree))
    return tree


@pytest.mark.parametrize("locked", [False, True])
def test_a_worktree_a_killed_run_left_is_removed_by_the_next_and_said(
    repo: Path, locked: bool, caplog: pytest.LogCaptureFixture
) -> None:
    left = _left_by_a_killed_run(repo, locked=locked)
    assert len(_worktrees(repo)) == 2
    with caplog.at_level("WARNING", logger="fuseci"), ab.trees("HEAD", None, repo):
        pass
    assert len(_worktrees(repo)) == 1 and not left.parent.exists()
    assert f"removed the temporary worktree {left} that a stopped fuseci ab left" in caplog.text


def test_a_temporary_directory_that_cannot_lock_is_refused_in_one_line(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without its lock, a running ab's worktree would look like a killed one's to another run."""

    def no_locks(*args, **kwargs):
        raise OSError(38, "Function not implemented")

    made: list[str] = []
    real = tempfile.mkdtemp
    monkeypatch.setattr(git, "file_lock", no_locks)
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: made.append(real(**kw)) or made[-1])
    sha = _git(repo, "rev-parse", "HEAD")
    with (
        pytest.raises(git.GitError, match="cannot lock it .Function not implemented.; .* set TMPDIR"),
        git.worktree(repo, sha),
    ):
        pass
    assert len(_worktrees(repo)) == 1
    assert made and not Path(made[0]).exists()


_HOLD = """
import sys, time
from pathlib import Path
from fuseci.ab import git
with git.worktree(Path(sys.argv[1]), sys.argv[2]) as tree:
    print(tree, flush=True)
    time.sleep(120)
"""


def _holding(repo: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process holding a worktree of ``repo``, as a running ``fuseci ab`` does."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(repo), _git(repo, "rev-parse", "HEAD")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


@pytest.mark.skipif(sys.platform == "win32", reason="signals")
def test_a_running_abs_worktree_is_kept_and_a_killed_ones_removed(repo: Path) -> None:
    proc, tree = _holding(repo)
    try:
        assert tree.is_dir()
        assert git.prune(repo) == [] and tree.is_dir() and len(_worktrees(repo)) == 2  # another run's: alive
        proc.kill()
        proc.wait(timeout=10)
        assert tree.is_dir() and len(_worktrees(repo)) == 2  # a SIGKILL leaves it
        assert git.prune(repo) == [tree]
        assert not tree.parent.exists() and len(_worktrees(repo)) == 1
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _cli(cwd: Path, *args: str, env: dict[str, str] | None = None):
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(app, ["ab", *args], env=env)
    finally:
        os.chdir(old)


def test_outside_a_repository_exit_3_with_the_fix(tmp_path: Path) -> None:
    result = _cli(tmp_path, "HEAD")
    assert result.exit_code == 3
    (line,) = result.output.strip().splitlines()
    assert line.startswith("fuseci: error: ") and "not inside a git working tree" in line and "clone" in line


def test_a_base_that_is_no_commit_exit_3(repo: Path) -> None:
    result = _cli(repo, "no-such-branch")
    assert result.exit_code == 3
    (line,) = result.output.strip().splitlines()
    assert "BASE 'no-such-branch' is not a commit" in line and "fetch-depth: 0" in line
    result = _cli(repo, "HEAD", "--not-a-ref")  # an option-like ref never reaches git
    assert result.exit_code == 2
    with pytest.raises(git.GitError, match="is not a git ref"):
        git.commit_of(repo, "--output=x", "HEAD")
    blob = _git(repo, "rev-parse", "HEAD:suites/stencil.yaml")
    with pytest.raises(git.GitError, match="is not a commit"):
        git.commit_of(repo, blob, "BASE")


def test_without_git_exit_3(repo: Path, tmp_path: Path) -> None:
    empty = tmp_path / "no-git"
    empty.mkdir()
    result = _cli(repo, "HEAD", env={"PATH": str(empty)})
    assert result.exit_code == 3
    assert "git is not installed" in result.output and "install git" in result.output


# --- the fingerprint -----------------------------------------------------------------------------


def _print(repo: Path, name: str = "elementwise") -> Fingerprint:
    return fingerprint(load_suite(repo / "suites" / f"{name}.yaml"), repo)


def test_the_fingerprint_covers_the_named_modules_and_what_they_import(repo: Path) -> None:
    f = _print(repo)
    # kernels/elementwise.py imports kernels._cuda and kernels._vector; the package's __init__ runs too
    assert set(f.files) == {"kernels/__init__.py", "kernels/elementwise.py", "kernels/_cuda.py", "kernels/_vector.py"}
    assert f.outside == () and f.missing == () and f.complete
    assert _print(repo).digest == f.digest  # deterministic


@pytest.mark.parametrize(
    ("path", "changed"),
    [
        ("kernels/elementwise.py", True),  # named by the suite
        ("kernels/_vector.py", True),  # imported by it
        ("kernels/__init__.py", True),  # runs on import
        ("kernels/stencil.py", False),  # another suite's
        ("README.md", False),
    ],
)
def test_a_change_reaches_the_fingerprint_only_through_what_the_suite_runs(
    repo: Path, path: str, changed: bool
) -> None:
    before = _print(repo)
    target = repo / path
    target.write_text((target.read_text() if target.exists() else "") + "\n# edited\n")
    after = _print(repo)
    assert (before.digest != after.digest) is changed
    assert differences(before, after) == ([path] if changed else [])


def test_the_suite_file_and_fuseci_version_are_in_the_fingerprint(repo: Path) -> None:
    before = _print(repo)
    suite = repo / "suites" / "elementwise.yaml"
    suite.write_text(suite.read_text() + "\n# a comment\n")
    after = _print(repo)
    assert differences(before, after) == ["the suite file"] and before.digest != after.digest
    other = replace(after, fuseci_version="9.9.9")
    assert other.digest != after.digest and differences(after, other) == [f"fuseci {__version__} -> 9.9.9"]


def test_relative_and_literal_dynamic_imports_are_followed_and_installed_ones_are_not_hashed(tmp_path: Path) -> None:
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "ops.py", "import json\nfrom . import helper\nfrom .sub.deep import x\n")
    write(tmp_path / "pkg" / "helper.py", "import importlib\nmod = importlib.import_module('pkg.dyn')\n")
    write(tmp_path / "pkg" / "dyn.py", "")
    write(tmp_path / "pkg" / "sub" / "deep.py", "x = 1\n")  # a namespace package on the way
    write(tmp_path / "pkg" / "unused.py", "")
    suite = write(
        tmp_path / "suites" / "s.yaml",
        "suite: s\ncases:\n  - id: c\n    inputs:\n      x: {shape: [4]}\n    variants:\n"
        "      unfused: pkg.ops:a\n      fused: json:dumps\n    reference: nowhere.mod:f\n",
    )
    f = fingerprint(load_suite(suite), tmp_path)
    assert set(f.files) == {"pkg/__init__.py", "pkg/ops.py", "pkg/helper.py", "pkg/dyn.py", "pkg/sub/deep.py"}
    assert f.outside == ("json",) and f.missing == ("nowhere.mod",)


def test_an_import_cycle_and_a_broken_file_do_not_stop_the_fingerprint(tmp_path: Path) -> None:
    write(tmp_path / "a.py", "import b\n")
    write(tmp_path / "b.py", "import a\nthis is not python(\n")
    suite = write(
        tmp_path / "suites" / "s.yaml",
        "suite: s\ncases:\n  - id: c\n    inputs:\n      x: {shape: [4]}\n    variants:\n      unfused: a:f\n      fused: a:g\n",
    )
    before = fingerprint(load_suite(suite), tmp_path)
    assert set(before.files) == {"a.py", "b.py"}  # b's bytes are hashed though it does not parse
    (tmp_path / "b.py").write_text("import a\nthis is still not python(\n")
    assert fingerprint(load_suite(suite), tmp_path).digest != before.digest


# --- which tree a side's processes import from ---------------------------------------------------

#: What the harness does before it measures, in a process started as fuseci ab starts the harness.
_IMPORTER = """
import os, sys
from pathlib import Path
from fuseci.config.parse import load_suite
from fuseci.harness.case_runner import preload, refuse_foreign
suite = load_suite(sys.argv[1])
preload(suite)
print(sys.modules["kernels.mine"].__file__)
refuse_foreign(Path(os.environ["FUSECI_FOREIGN_TREE"]), Path.cwd())
print("fuseci from", sys.modules["fuseci"].__file__)
"""

_MINE_SUITE = (
    "suite: mine\ncases:\n  - id: c\n    inputs:\n      x: {shape: [4]}\n    variants:\n"
    "      unfused: kernels.mine:f\n      fused: kernels.mine:g\n"
)


def _tree(root: Path, text: str, *, own_fuseci: bool = False) -> Path:
    write(root / "kernels" / "__init__.py", "")
    write(root / "kernels" / "mine.py", f"def f(x):\n    return x\n\ng = f\nWHO = {text!r}\n")
    if own_fuseci:  # an older fuseci, as the base of a pull request to fuseci itself holds
        write(root / "fuseci" / "__init__.py", "raise SystemExit('the fuseci package of the tree was imported')\n")
    return write(root / "suites" / "mine.yaml", _MINE_SUITE)


def _start_like_the_harness(suite: Path, options: MeasureOptions, tmp_path: Path) -> tuple[int, str]:
    log = tmp_path / f"{suite.parent.parent.name}.log"
    argv = [sys.executable, "-c", _IMPORTER, str(suite)]
    rc = process.run_logged(argv, log, 60, cwd=options.cwd, env=options.env)
    return rc, log.read_text()


def test_each_sides_processes_import_that_sides_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness puts its working directory first on sys.path: each side's processes run in
    their own tree, so the base's never import the head's modules, whatever PYTHONPATH says;
    and a tree holding a fuseci package does not replace the fuseci that measures."""
    base = ab.Side("base", "base x", tmp_path / "base")
    head = ab.Side("head", "the working tree", tmp_path / "head")
    suites = {s.name: _tree(s.root, s.name, own_fuseci=s is base) for s in (base, head)}
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(head.root), str(ROOT)]))
    for side, other in ((base, head), (head, base)):
        options = ab.side_options(side, other, ab.AbOptions(report_dir=tmp_path / "out"))
        assert options.cwd == side.root and options.report_dir == (tmp_path / "out" / side.name)
        assert options.env["PYTHONPATH"].split(os.pathsep) == (
            [str(ROOT)] if side is base else [str(head.root), str(ROOT)]
        )
        rc, out = _start_like_the_harness(suites[side.name], options, tmp_path)
        assert rc == 0, out
        loaded, fuseci_line = out.strip().splitlines()[-2:]
        assert Path(loaded) == side.root / "kernels" / "mine.py"
        assert Path(fuseci_line.removeprefix("fuseci from ")).is_relative_to(ROOT)


def test_a_module_from_the_other_tree_is_refused(tmp_path: Path) -> None:
    """Should a side import a module from the other side's tree after all (an editable install
    that maps the package there), the harness refuses to measure, saying which and from where."""
    base, head = tmp_path / "base", tmp_path / "head"
    _tree(head, "head")
    suite = write(base / "suites" / "mine.yaml", _MINE_SUITE)  # the base has no kernels package
    env = {
        "PYTHONSAFEPATH": "1",
        "FUSECI_FOREIGN_TREE": str(head),
        "PYTHONPATH": os.pathsep.join([str(head), str(ROOT)]),
    }
    options = MeasureOptions(
        cwd=base, extra_env=env, report_dir=tmp_path / "out"
    )  # its compile cache: not the repository's
    rc, out = _start_like_the_harness(suite, options, tmp_path)
    assert rc != 0
    assert "kernels.mine" in out and "from the other side's tree" in out and str(head) in out


def test_fusecis_own_main_module_under_another_name_is_not_foreign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m fuseci.harness`` runs as ``__main__``, and ``import multiprocessing`` (which
    PyTorch's compile workers bring on a cold compile cache) registers that same module again as
    ``__mp_main__``. fuseci installed from the head's tree measures both sides: its own modules,
    under any name, are not the other side's code; a kernel module of that tree still is."""
    import types

    import fuseci.harness.case_runner as harness_run

    head = Path(harness_run.__file__).resolve().parents[2]  # the tree fuseci itself is installed from
    main = types.ModuleType("__mp_main__")
    main.__file__ = str(Path(harness_run.__file__).with_name("__main__.py"))
    theirs = types.ModuleType("kernels.of_the_head")
    theirs.__file__ = str(head / "kernels" / "elementwise.py")
    monkeypatch.setitem(sys.modules, "__mp_main__", main)
    monkeypatch.setitem(sys.modules, "kernels.of_the_head", theirs)
    found = harness_run.foreign_modules(head, tmp_path)
    assert not [f for f in found if f.startswith(("__mp_main__", "__main__", "fuseci"))]
    assert [f for f in found if f.startswith("kernels.of_the_head ")]


def test_measuring_runs_the_profiled_and_timed_processes_in_the_sides_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fuseci.measure import profile as ncu
    from fuseci.measure.run import timed_pass

    seen: list[tuple[str, Path | None, dict[str, str]]] = []

    def fake_run_logged(argv, log_path, timeout_s, cwd=None, env=None, started=None):
        seen.append(("ncu", cwd, dict(env or {})))
        raise FileNotFoundError(argv[0])

    def fake_start_logged(argv, log_path, cwd=None, env=None):
        seen.append(("timed", cwd, dict(env or {})))
        return subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)

    monkeypatch.setattr(ncu, "find_ncu", lambda explicit=None: "ncu")
    monkeypatch.setattr(ncu, "ncu_version", lambda exe: "2025.3.1.0")
    monkeypatch.setattr(process, "run_logged", fake_run_logged)
    monkeypatch.setattr(process, "start_logged", fake_start_logged)
    base = ab.Side("base", "base x", tmp_path / "tree")
    head = ab.Side("head", "the working tree", ROOT)
    options = ab.side_options(base, head, ab.AbOptions(report_dir=tmp_path / "out"))
    suite = load_suite(ROOT / "suites" / "elementwise.yaml")
    with pytest.raises(FuseciError):
        measure(suite, options)
    with pytest.raises(FuseciError):
        timed_pass(suite, options, load_record(), ["bias_gelu"])
    assert {what for what, _, _ in seen} == {"ncu", "timed"}
    for _, cwd, env in seen:
        assert cwd == base.root
        assert env["FUSECI_FOREIGN_TREE"] == str(ROOT) and env["PYTHONSAFEPATH"] == "1"
        assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(str((tmp_path / "out").absolute()))


def test_the_profiled_run_runs_only_the_cases_asked_and_the_timed_pass_follows_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--case`` reaches the harness under ncu and the timed process, which times those of them
    that its profiled record (``--after``) holds checked right (or, ahead of it, those only)."""
    from fuseci.measure import profile as ncu

    argvs: dict[str, list[str]] = {}

    def fake_run_logged(argv, log_path, timeout_s, cwd=None, env=None, started=None):
        argvs["ncu"] = list(argv)
        raise FileNotFoundError(argv[0])

    def fake_start_logged(argv, log_path, cwd=None, env=None):
        argvs["timed"] = list(argv)
        return subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)

    monkeypatch.setattr(ncu, "find_ncu", lambda explicit=None: "ncu")
    monkeypatch.setattr(ncu, "ncu_version", lambda exe: "2025.3.1.0")
    monkeypatch.setattr(process, "run_logged", fake_run_logged)
    monkeypatch.setattr(process, "start_logged", fake_start_logged)
    suite = load_suite(ROOT / "suites" / "elementwise.yaml")
    with pytest.raises(FuseciError):
        measure(suite, MeasureOptions(report_dir=tmp_path, cases=("bias_gelu", "add_mul")))
    harness = argvs["ncu"][argvs["ncu"].index("fuseci.harness") :]
    assert [a for a in harness if a.startswith("--case")] == ["--case=bias_gelu", "--case=add_mul"]
    assert [a for a in argvs["timed"] if a.startswith("--case")] == ["--case=bias_gelu", "--case=add_mul"]
    assert any(a.startswith("--after=") for a in argvs["timed"])
    with pytest.raises(FuseciError):
        measure(suite, MeasureOptions(report_dir=tmp_path))
    assert not any(a.startswith("--case") for a in argvs["ncu"])


def load_record():
    from fuseci.records.harness import read_record

    return read_record(REPORTS / "elementwise.harness.json")


# --- judging from recorded reports ---------------------------------------------------------------


class Recorded:
    """A :class:`fuseci.api.session.Measurer` that reads recorded reports instead of profiling: per
    side, suite id → report. It notes every call, in order."""

    def __init__(self, base: dict[str, Path], head: dict[str, Path]) -> None:
        self.reports = {"base": base, "head": head}
        self.calls: list[tuple[str, str, str]] = []
        self.cases: list[tuple[str, tuple[str, ...] | None]] = []
        """Per measure call, the side and the cases it was asked for (None: every case)."""

    def ready(self) -> None:
        pass

    @staticmethod
    def side(options: MeasureOptions) -> str:
        return options.report_dir.name

    def measure(self, suite, options: MeasureOptions) -> SuiteResults:
        side = self.side(options)
        self.calls.append(("measure", side, suite.name))
        self.cases.append((side, options.cases))
        report = self.reports[side].get(suite.name)
        if report is None:
            raise FuseciError(f"{side} {suite.name}: no recorded report")
        return measure(suite, MeasureOptions(from_report=report))

    def retime(self, suite, options, results, cases):
        self.calls.append(("retime", self.side(options), ",".join(cases)))
        return results


def _side(name: str) -> ab.Side:
    return ab.Side(name, f"{name} 1a2b3c4" if name == "base" else "the working tree", ROOT, None)


def _pair(name: str, *, base: bool = True, head: bool = True) -> ab.SuitePair:
    """A suite of this checkout on the sides asked, each with its fingerprint, every case measured."""
    suite = load_suite(ROOT / "suites" / f"{name}.yaml")
    printed = fingerprint(suite, ROOT)
    return ab.SuitePair(
        Path("suites") / f"{name}.yaml",
        suite if base else None,
        suite if head else None,
        base_print=printed if base else None,
        head_print=printed if head else None,
    )


def _ab(pairs: list[ab.SuitePair], tool: Recorded, **kw) -> ab.AbOutcome:
    with pytest.MonkeyPatch.context() as patched:
        measure_with(patched, tool)
        return ab.run_ab(pairs, _side("base"), _side("head"), ab.AbOptions(report_dir=Path("out"), **kw))


def test_a_a_passes_and_says_what_it_was_judged_against() -> None:
    tool = Recorded({"elementwise": CLEAN_REPORT}, {"elementwise": CLEAN_REPORT})
    (c,) = _ab([_pair("elementwise")], tool).comparisons
    assert exit_code([c]) == 0 and c.verdict is Verdict.PASS
    assert c.baseline_path == "base 1a2b3c4 (same runner)" and c.has_baseline
    assert c.suite_path == "suites/elementwise.yaml" and c.env_differences == ()
    assert any(k.check is CheckKind.GAIN for case in c.cases for k in case.checks)


def test_a_planted_split_kernel_fails_for_the_right_reason() -> None:
    tool = Recorded({"elementwise": CLEAN_REPORT}, {"elementwise": REGRESSED_REPORT})
    (c,) = _ab([_pair("elementwise")], tool).comparisons
    assert exit_code([c]) == 1
    failing = {
        (case.case, k.variant, k.check, k.quantity)
        for case in c.cases
        for k in case.checks
        if k.verdict is Verdict.REGRESSED
    }
    # the split kernel, caught by the gates that catch it against a stored baseline, its bytes
    # (the intermediate stored and loaded again) compared though its kernels are others
    assert failing == {
        ("scale_relu_add", "fused", CheckKind.VALUE, "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"),
        ("scale_relu_add", "fused", CheckKind.VALUE, "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum"),
        ("scale_relu_add", "fused", CheckKind.INVENTORY, "kernels"),
        ("scale_relu_add", "fused", CheckKind.GAIN, "launches"),
        ("scale_relu_add", "fused", CheckKind.GAIN, "dram__bytes.sum"),
        ("scale_relu_add", "fused", CheckKind.GAIN, "gpu__time_duration.sum"),
        ("scale_relu_add", "fused", CheckKind.GAIN, "event_time"),
        ("scale_relu_add", "fused", CheckKind.BYTES, "dram_bytes_over_min"),
        ("scale_relu_add", "fused", CheckKind.EXPECT, "dram__bytes.sum"),
        ("scale_relu_add", "fused", CheckKind.EXPECT, "launches"),
    }
    split = next(
        k for case in c.cases for k in case.checks if k.check is CheckKind.INVENTORY and k.verdict is Verdict.REGRESSED
    )
    assert "the fusion split" in split.message


class Rebuilt(Recorded):
    """The head's kernels recompiled: each fused kernel's registers moved, as an edit moves them."""

    def measure(self, suite, options: MeasureOptions) -> SuiteResults:
        results = super().measure(suite, options)
        if self.side(options) != "head":
            return results
        kernels = results.kernels.copy()
        fused = kernels["variant"] != "unfused"
        kernels.loc[fused, "launch__registers_per_thread"] += 8
        return summarize(kernels, results.record)


def test_a_recompiled_variant_is_judged_not_new() -> None:
    """An edit that recompiles a kernel (other registers) leaves a variant on both sides: judged
    against the base's, its bytes compared to the byte, never NEW."""
    tool = Rebuilt({"elementwise": CLEAN_REPORT}, {"elementwise": CLEAN_REPORT})
    (c,) = _ab([_pair("elementwise")], tool).comparisons
    assert exit_code([c]) == 0
    checks = [k for case in c.cases for k in case.checks if k.variant == "fused"]
    assert checks and not [k for k in checks if k.verdict is Verdict.NEW]
    loaded = [k for k in checks if k.quantity == "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"]
    assert len(loaded) == 5 and all(k.verdict is Verdict.PASS and "its kernels changed" in k.message for k in loaded)
    assert all("registers" in k.message for k in loaded)


def test_the_reverse_is_an_improvement_not_a_failure() -> None:
    tool = Recorded({"elementwise": REGRESSED_REPORT}, {"elementwise": CLEAN_REPORT})
    (c,) = _ab([_pair("elementwise")], tool).comparisons
    assert exit_code([c]) == 0
    assert any(k.verdict is Verdict.IMPROVED for case in c.cases for k in case.checks)


def test_planted_regressions_are_caught_against_the_bases_healthy_kernel() -> None:
    report = REPORTS / "mutants.ncu-rep.xz"
    tool = Recorded({"mutants": report}, {"mutants": report})
    (c,) = _ab([_pair("mutants")], tool).comparisons
    assert exit_code([c]) == 0
    planted = [k for case in c.cases for k in case.checks if k.check is CheckKind.PLANTED]
    assert planted and all(k.verdict is Verdict.PASS for k in planted)


def test_measurements_are_interleaved_base_then_head_per_suite() -> None:
    reports = {"elementwise": CLEAN_REPORT, "stencil": REPORTS / "stencil.ncu-rep.xz"}
    tool = Recorded(reports, reports)
    outcome = _ab([_pair("elementwise"), _pair("stencil")], tool, in_flight=1)
    assert tool.calls == [
        ("measure", "base", "elementwise"),
        ("measure", "head", "elementwise"),
        ("measure", "base", "stencil"),
        ("measure", "head", "stencil"),
    ]
    assert exit_code(list(outcome.comparisons)) == 0
    assert [r.suite for r in outcome.measured] == ["elementwise", "stencil"]


def test_a_borderline_speedup_is_re_measured_on_both_sides_pass_for_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def once(comparison):
        asked.append(1)
        return ["bias_gelu"] if len(asked) == 1 else []

    monkeypatch.setattr(session, "retry_cases", once)
    tool = Recorded({"elementwise": CLEAN_REPORT}, {"elementwise": CLEAN_REPORT})
    _ab([_pair("elementwise")], tool)
    assert [c for c in tool.calls if c[0] == "retime"] == [
        ("retime", "base", "bias_gelu"),
        ("retime", "head", "bias_gelu"),
        ("retime", "base", "bias_gelu"),
        ("retime", "head", "bias_gelu"),
    ]


def _partly(cases: tuple[str, ...]) -> ab.SuitePair:
    """The elementwise suite, its module files differing between the sides, ``cases`` changed."""
    suite = load_suite(ROOT / "suites" / "elementwise.yaml")
    a, b = Fingerprint("s", {"kernels/elementwise.py": "1"}), Fingerprint("s", {"kernels/elementwise.py": "2"})
    return ab.SuitePair(Path("suites") / "elementwise.yaml", suite, suite, "", a, b, cases)


def test_only_the_changed_cases_are_measured_on_both_sides_the_others_pass_unmeasured() -> None:
    tool = Recorded({"elementwise": CLEAN_REPORT}, {"elementwise": REGRESSED_REPORT})
    outcome = _ab([_partly(("bias_gelu", "scale_relu_add"))], tool)
    assert sorted(tool.cases) == [("base", ("bias_gelu", "scale_relu_add")), ("head", ("bias_gelu", "scale_relu_add"))]
    (c,) = outcome.comparisons
    assert [case.case for case in c.cases] == [
        "scale_relu_add",
        "bias_gelu",
        "relu_bn_add_relu",
        "add_mul",
        "relu_and_scale",
    ]
    kept = [case for case in c.cases if case.case not in ("bias_gelu", "scale_relu_add")]
    for case in kept:
        (check,) = case.checks
        assert check.verdict is Verdict.PASS and check.check is CheckKind.CASE
        assert check.message.startswith("unchanged, not measured: the suite file, the code this case runs (")
        assert (
            f"kernels.elementwise:{case.case}_fused" in check.message and "(--all measures it anyway)" in check.message
        )
        assert case.notes and case.notes[0].startswith("unchanged, not measured")
    # the measured cases are judged against the base's same cases, exactly as ever
    assert exit_code([c]) == 1
    assert {case.case for case in c.cases if case.verdict is Verdict.REGRESSED} == {"scale_relu_add"}
    assert c.has_baseline and c.env


def test_all_measures_every_case_of_a_partly_changed_suite() -> None:
    tool = Recorded({"elementwise": CLEAN_REPORT}, {"elementwise": CLEAN_REPORT})
    (c,) = _ab([_partly(("bias_gelu",))], tool, every=True).comparisons
    assert sorted(tool.cases) == [("base", None), ("head", None)]
    assert not any(k.message.startswith("unchanged") for case in c.cases for k in case.checks)
    assert len(c.cases) == 5 and exit_code([c]) == 0


def test_a_suite_whose_cases_are_all_unchanged_is_not_measured() -> None:
    tool = Recorded({}, {})
    outcome = _ab([_partly(())], tool)
    assert tool.calls == []
    (c,) = outcome.comparisons
    assert c.verdict is Verdict.PASS and not c.env and len(c.cases) == 5
    assert all(case.checks[0].message.startswith("unchanged, not measured") for case in c.cases)
    assert outcome.unchanged == ("elementwise",) and outcome.measured == ()


def test_a_re_measured_partly_changed_suite_retimes_only_measured_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "retry_cases", lambda comparison: ["bias_gelu"] if len(tool.calls) == 2 else [])
    tool = Recorded({"elementwise": CLEAN_REPORT}, {"elementwise": CLEAN_REPORT})
    (c,) = _ab([_partly(("bias_gelu",))], tool).comparisons
    assert [x for x in tool.calls if x[0] == "retime"] == [("retime", s, "bias_gelu") for s in ("base", "head") * 2]
    assert [case.case for case in c.cases if len(case.checks) > 1] == ["bias_gelu"]


def test_added_removed_and_failed_sides() -> None:
    tool = Recorded({"elementwise": CLEAN_REPORT}, {"stencil": REPORTS / "stencil.ncu-rep.xz"})
    outcome = _ab(
        [_pair("elementwise", head=False), _pair("stencil", base=False), _pair("reduction")],
        tool,
    )
    removed, added, broken = outcome.comparisons
    assert removed.verdict is Verdict.MISSING and removed.cases[0].checks[0].message.startswith("removed: ")
    assert ("measure", "head", "elementwise") not in tool.calls and ("measure", "base", "stencil") not in tool.calls
    # an added suite is judged without a reference: every gain NEW, the rest (correctness,
    # expectations, bytes) as always
    assert not added.has_baseline and "added" in str(added.baseline_path)
    assert exit_code([added]) == 0 and any(k.verdict is Verdict.NEW for case in added.cases for k in case.checks)
    assert broken.verdict is Verdict.ERROR and "base 1a2b3c4 could not be measured" in broken.cases[0].checks[0].message
    assert exit_code([removed, added]) == 0 and exit_code([broken]) == 3


class Refused(Recorded):
    """ncu refuses the counters (a failure of the machine's, not the suite's) for the elementwise suite."""

    def measure(self, suite, options: MeasureOptions) -> SuiteResults:
        if suite.name != "elementwise":
            return super().measure(suite, options)
        self.calls.append(("measure", self.side(options), suite.name))
        raise NcuError("ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM)", machine_wide=True)


def test_a_machine_wide_ncu_failure_leaves_the_later_suites_not_run_in_ab_and_in_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One job body serves both commands: the first suite says why, the later ones are not measured."""
    reports = {"elementwise": CLEAN_REPORT, "stencil": REPORTS / "stencil.ncu-rep.xz"}
    refused = "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM)"
    blocked = "not run: ncu cannot profile on this machine (elementwise says why)"
    tool = Refused(reports, reports)
    first, later = _ab([_pair("elementwise"), _pair("stencil")], tool, in_flight=1).comparisons
    assert first.cases[0].checks[0].message == f"base 1a2b3c4 could not be measured: {refused}"
    assert later.cases[0].checks[0].message == blocked
    assert tool.calls == [("measure", "base", "elementwise")]

    tool = measure_with(monkeypatch, Refused({}, reports))
    suites = [load_suite(ROOT / "suites" / f"{name}.yaml") for name in ("elementwise", "stencil")]
    options = api.RunOptions(baselines=tmp_path / "baselines", report_dir=tmp_path / "head", in_flight=1)
    outcome = api.run(suites, options)
    assert [c.cases[0].checks[0].message for c in outcome.comparisons] == [refused, blocked]
    assert tool.calls == [("measure", "head", "elementwise")] and outcome.measured == ()


# --- the command, end to end in a repository -----------------------------------------------------


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Path]]:
    """fuseci ab's measuring replaced by recorded reports: fill in per side suite id → report."""
    reports: dict[str, dict[str, Path]] = {"base": {}, "head": {}}
    made: list[Recorded] = []

    def profiler(ncu=None):
        made.append(Recorded(reports["base"], reports["head"]))
        return made[-1]

    measure_with(monkeypatch, profiler)
    reports["calls"] = made  # type: ignore[assignment]
    return reports


def _edit_function(path: Path, name: str) -> None:
    """A real code change to one function that keeps what it does: a statement after its last."""
    import ast

    text = path.read_text()
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)
    lines = text.splitlines(keepends=True)
    lines.insert(node.end_lineno or 0, "    pass\n")
    path.write_text("".join(lines))


def test_a_pull_request_that_changes_one_kernel_measures_only_its_suite(repo: Path, recorded) -> None:
    _edit_function(repo / "kernels" / "stencil.py", "conv_bias_relu_fused")
    recorded["base"]["stencil"] = recorded["head"]["stencil"] = REPORTS / "stencil.ncu-rep.xz"
    out = repo.parent / "out"
    result = _cli(
        repo, "HEAD", "--json", str(out / "r.json"), "--markdown", str(out / "s.md"), "--junit", str(out / "j.xml")
    )
    assert result.exit_code == 0, result.output
    assert "elementwise (suites/elementwise.yaml): unchanged, not measured" in result.output
    assert (
        "stencil (suites/stencil.yaml): changed: kernels/stencil.py; measuring 1 of 2 cases (conv_bias_relu), "
        "1 unchanged, not measured"
    ) in result.output
    # each suite's table once: printed as it is judged, skipped suites too, then the totals
    assert result.output.count("suite stencil: ") == 1 and result.output.count("suite elementwise: ") == 1
    assert "note: depthwise_affine_relu6: unchanged, not measured" in result.output
    (tool,) = recorded["calls"]
    assert [c[2] for c in tool.calls] == ["stencil", "stencil"]
    assert sorted(tool.cases) == [("base", ("conv_bias_relu",)), ("head", ("conv_bias_relu",))]
    doc = json.loads((out / "r.json").read_text())
    by_suite = {s["suite"]: s for s in doc["suites"]}
    assert by_suite["elementwise"]["cases"][0]["checks"][0]["message"].startswith("unchanged, not measured")
    assert by_suite["stencil"]["baseline_path"].endswith("(same runner)")
    stencil = {c["case"]: c for c in by_suite["stencil"]["cases"]}
    assert list(stencil) == ["conv_bias_relu", "depthwise_affine_relu6"]  # suite order
    (kept,) = stencil["depthwise_affine_relu6"]["checks"]
    assert kept["verdict"] == "pass" and kept["message"].startswith("unchanged, not measured: ")
    assert "kernels.stencil:depthwise_affine_relu6_fused" in kept["message"]
    assert len(stencil["conv_bias_relu"]["checks"]) > 1
    junit = (out / "j.xml").read_text()
    assert 'name="depthwise_affine_relu6' in junit and "unchanged, not measured" in junit
    summary = (out / "s.md").read_text()
    assert "was not measured" in summary and "unchanged, not measured" in summary
    assert "depthwise_affine_relu6: unchanged, not measured" in summary
    assert len(_worktrees(repo)) == 1


def test_each_sides_fingerprints_are_read_once_per_suite(repo: Path, recorded, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which cases to measure, the causes of findings and the audit of what ran all read the one
    fingerprint taken of each side's suite: its tree is read once per side and suite."""
    from fuseci.ab import cases

    read: list[tuple[str, Path]] = []
    reading = cases.Prints.__init__

    def counted(self, suite, tree) -> None:
        read.append((suite.name, Path(getattr(tree, "root", tree))))
        reading(self, suite, tree)

    monkeypatch.setattr(cases.Prints, "__init__", counted)
    _edit_function(repo / "kernels" / "stencil.py", "conv_bias_relu_fused")
    recorded["base"]["stencil"] = recorded["head"]["stencil"] = REPORTS / "stencil.ncu-rep.xz"
    result = _cli(repo, "HEAD")
    assert result.exit_code == 0, result.output
    (tool,) = recorded["calls"]
    assert sorted(c[:2] for c in tool.calls) == [("measure", "base"), ("measure", "head")]  # stencil measured
    assert sorted(name for name, _ in read) == ["elementwise", "elementwise", "stencil", "stencil"]
    assert len(set(read)) == 4  # each suite once in each side's tree


def test_a_comment_only_change_measures_nothing(repo: Path, recorded) -> None:
    path = repo / "kernels" / "stencil.py"
    path.write_text(path.read_text() + "\n# tuned\n")
    out = repo.parent / "out"
    result = _cli(repo, "HEAD", "--suite", "suites/stencil.yaml", "--json", str(out / "r.json"))
    assert result.exit_code == 0, result.output
    assert "changed: kernels/stencil.py; no case's code changed: 2 cases unchanged, not measured" in result.output
    assert recorded["calls"] == [] or all(not t.calls for t in recorded["calls"])
    (suite,) = json.loads((out / "r.json").read_text())["suites"]
    assert [c["case"] for c in suite["cases"]] == ["conv_bias_relu", "depthwise_affine_relu6"]
    assert all(c["checks"][0]["message"].startswith("unchanged, not measured") for c in suite["cases"])
    assert suite["verdict"] == "pass"


def test_all_measures_unchanged_suites_and_a_regression_exits_1(repo: Path, recorded) -> None:
    recorded["base"].update(elementwise=CLEAN_REPORT, stencil=REPORTS / "stencil.ncu-rep.xz")
    recorded["head"].update(elementwise=REGRESSED_REPORT, stencil=REPORTS / "stencil.ncu-rep.xz")
    result = _cli(repo, "HEAD", "HEAD", "--all", "--results-dir", str(repo.parent / "runs"))
    assert result.exit_code == 1, result.output
    assert "unchanged: measured anyway (--all)" in result.output
    assert "scale_relu_add" in result.output and "baseline base " in result.output
    (kept,) = (repo.parent / "runs").glob("*.json")
    head = _git(repo, "rev-parse", "HEAD")
    assert kept.name.endswith(f"-{head[:7]}.json") or head[:7] in kept.name
    assert len(_worktrees(repo)) == 1


def test_a_suite_named_outside_the_repository_is_refused(repo: Path, recorded) -> None:
    result = _cli(repo, "HEAD", "--suite", str(ROOT / "suites" / "elementwise.yaml"))
    assert result.exit_code == 2 and "outside the git repository" in result.output


def test_a_broken_head_suite_file_is_reported_before_anything_is_measured(repo: Path, recorded) -> None:
    (repo / "suites" / "stencil.yaml").write_text("suite: [\n")
    result = _cli(repo, "HEAD")
    assert result.exit_code == 3 and "suites/stencil.yaml" in result.output
    assert recorded["calls"] == [] or all(not t.calls for t in recorded["calls"])


def test_no_report_replaces_a_baseline_a_suite_a_run_file_or_a_sides_own_file(repo: Path, recorded) -> None:
    """ab reads no baseline, but the repository keeps them: `--json baselines/<card>/<suite>.json`
    would replace a committed one."""
    shutil.copytree(ROOT / "baselines" / "nvidia-h200", repo / "baselines" / "nvidia-h200")
    _commit(repo, "baselines")
    runs = repo.parent / "runs"
    write(runs / "20260101T000000Z-nvidia-h200.json", "{}")
    _edit_function(repo / "kernels" / "stencil.py", "conv_bias_relu_fused")
    before = {p: p.read_bytes() for p in [*repo.rglob("*.json"), *repo.rglob("*.yaml"), *runs.iterdir()]}
    out = repo.parent / "out"
    cases = [
        (("--json", "baselines/nvidia-h200/elementwise.json"), "a baseline"),
        (("--markdown", "baselines/nvidia-h200/pytorch.json"), "a baseline"),
        (("--junit", "suites/elementwise.yaml"), "the suite file of 'elementwise'"),
        (("--results-dir", str(runs), "--json", str(runs / "20260101T000000Z-nvidia-h200.json")), "a run file"),
        (("--report-dir", str(out), "--json", str(out / "head" / "stencil.harness.json")), "a harness record"),
    ]
    for args, what in cases:
        result = _cli(repo, "HEAD", *args)
        assert result.exit_code == 3, (args, result.output)
        assert f": is {what}" in result.stderr and "would replace it" in result.stderr, (args, result.stderr)
    summary = _cli(repo, "HEAD", env={"GITHUB_STEP_SUMMARY": str(repo / "baselines" / "nvidia-h200" / "stencil.json")})
    assert summary.exit_code == 3 and "$GITHUB_STEP_SUMMARY would replace it" in summary.stderr
    assert recorded["calls"] == [] or all(not t.calls for t in recorded["calls"])  # refused before measuring
    assert {p: p.read_bytes() for p in before} == before
    assert len(_worktrees(repo)) == 1


# --- a job that ends: SIGTERM (a cancelled CI job), SIGHUP (a closed SSH session) -----------------

#: A stand-in for ncu that profiles for ever: it says its pid and waits, as ncu on a long suite does.
_SLOW_NCU = """#!{python}
import os, sys, time
if sys.argv[1:] == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1) (public-release)")
    sys.exit(0)
open(os.path.join(os.environ["FAKE_NCU_PIDS"], str(os.getpid())), "w").close()
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(sys.platform == "win32", reason="signals")
@pytest.mark.parametrize("sig", ["SIGHUP", "SIGTERM"])
@pytest.mark.parametrize("command", ["ab", "run"])
def test_a_signal_that_ends_the_job_stops_both_sides_and_removes_the_worktree(
    repo: Path, sig: str, command: str
) -> None:
    """ab: both sides' profiled runs stopped and the worktree removed; run: its profiled run
    stopped (it runs in a session of its own, where no signal to the job reaches it)."""
    import signal

    ncu, pids = repo.parent / "ncu", repo.parent / "pids"
    ncu.write_text(_SLOW_NCU.format(python=sys.executable))
    ncu.chmod(0o755)
    pids.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAKE_NCU_PIDS": str(pids), "NO_COLOR": "1"}
    env.pop("GITHUB_ACTIONS", None)
    args = ["ab", "HEAD", "--all", "--suite"] if command == "ab" else ["run"]
    sides = 2 if command == "ab" else 1
    proc = subprocess.Popen(
        [sys.executable, "-m", "fuseci", *args, "suites/elementwise.yaml", "--ncu", str(ncu),
         "--report-dir", str(repo.parent / "out")],
        cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        for _ in range(600):  # both sides' profiled runs under way
            if len(list(pids.iterdir())) == sides or proc.poll() is not None:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        started = [int(p.name) for p in pids.iterdir()]
        assert len(started) == sides, proc.communicate(timeout=30)
        assert len(_worktrees(repo)) == sides
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for p in pids.iterdir():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(p.name), signal.SIGKILL)
    assert proc.returncode == 128 + getattr(signal, sig), err
    assert f"fuseci: error: cancelled ({sig})" in err and "Traceback" not in err
    assert not any(_alive(pid) for pid in started)  # both sides' ncu stopped
    assert len(_worktrees(repo)) == 1
    assert not [p for p in Path(tempfile.gettempdir()).glob(f"{git.WORKTREE_PREFIX}*") if (p / "tree").exists() and
                str(p) in _git(repo, "worktree", "list")]  # fmt: skip
