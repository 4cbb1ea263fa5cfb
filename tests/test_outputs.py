"""Report files (``--junit``, ``--json``, ``--markdown``, ``bench --json``, ``doctor --json``):
written atomically over regular files only, streamed to devices and pipes, never over an input."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from helpers import CLEAN_REPORT, REGRESSED_REPORT, ROOT, fuzz_settings, invoke, write
from helpers import snapshot as _snapshot
from helpers import within as _within
from hypothesis import given
from hypothesis import strategies as st

from fuseci.files.atomic import atomic_write_text
from fuseci.files.outputs import append_output, same_file, write_output

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="devices, FIFOs and links are POSIX")

SUITE = "suites/elementwise.yaml"


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- write_output -----------------------------------------------------------------------------


def test_a_new_file_and_a_replaced_one(tmp_path: Path) -> None:
    path = tmp_path / "out" / "j.xml"
    write_output(path, "first\n")
    path.chmod(0o640)
    write_output(path, "second\n")
    assert path.read_text() == "second\n" and stat.S_IMODE(path.stat().st_mode) == 0o640
    assert _files(path.parent) == ["j.xml"]  # no temporary file left


def test_dev_null_stays_a_device() -> None:
    write_output(Path("/dev/null"), "<testsuites/>\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_fifo_is_written_to_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_output(fifo, "report ü\n")
    reader.join(timeout=10)
    assert got == ["report ü\n".encode()]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and _files(tmp_path) == ["pipe"]


def test_a_link_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    target = write(tmp_path / "real" / "j.xml", "old\n")
    link = tmp_path / "j.xml"
    link.symlink_to(target)
    write_output(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(target) and target.read_text() == "new\n"
    assert _files(target.parent) == ["j.xml"]


def test_a_dangling_link_creates_its_target_but_no_directory(tmp_path: Path) -> None:
    link = tmp_path / "j.xml"
    link.symlink_to(tmp_path / "made.xml")
    write_output(link, "x\n")
    assert link.is_symlink() and (tmp_path / "made.xml").read_text() == "x\n"
    far = tmp_path / "far.xml"
    far.symlink_to(tmp_path / "no" / "such" / "dir" / "f.xml")
    with pytest.raises(FileNotFoundError, match="whose directory does not exist"):
        write_output(far, "x\n")
    assert not (tmp_path / "no").exists() and far.is_symlink()


def test_a_directory_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "d" / "keep", "k")
    with pytest.raises(IsADirectoryError):
        write_output(tmp_path / "d", "x")
    assert _files(tmp_path / "d") == ["keep"]


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(OSError, match="a socket"):
            write_output(path, "x")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_an_unwritable_directory_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "j.xml", "old\n")

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr("fuseci.files.atomic._temporary", denied)  # as a read-only directory does (root ignores modes)
    with pytest.raises(PermissionError):
        write_output(path, "new\n")
    assert path.read_text() == "old\n" and _files(tmp_path) == ["j.xml"]


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_files_fuseci_creates_get_the_mode_the_umask_leaves(tmp_path: Path, umask: int) -> None:
    """As ``>`` and ``>>`` make them: 0666 less the umask (0644 under the usual 022), never
    executable; the step summary fuseci appends to is created so too."""
    old = os.umask(umask)
    try:
        append_output(tmp_path / "summary.md", "x\n")
        write_output(tmp_path / "j.xml", "x\n")
        atomic_write_text(tmp_path / "new" / "run.json", "{}\n")
    finally:
        os.umask(old)
    for made in ("summary.md", "j.xml", "new/run.json"):
        assert stat.S_IMODE((tmp_path / made).stat().st_mode) == 0o666 & ~umask, made


def test_a_write_never_changes_the_umask_other_threads_create_files_under(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The umask is the process's: a writer that set it to 0 for a moment, to learn it, would
    let a file another thread creates in that moment (a log, a record) be writable by anyone.
    Each call of ``os.umask`` stands for that moment here: a file is created inside it."""
    made: list[Path] = []
    real = os.umask

    def umask(mask: int) -> int:
        old = real(mask)
        made.append(tmp_path / f"other-{len(made)}")
        made[-1].write_text("another thread's file")
        return old

    monkeypatch.setattr(os, "umask", umask)
    write_output(tmp_path / "j.xml", "x\n")
    atomic_write_text(tmp_path / "r.json", "{}\n")
    monkeypatch.undo()
    mask = os.umask(0)
    os.umask(mask)
    for path in made:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path.name


def test_text_that_is_not_unicode_is_written_escaped(tmp_path: Path) -> None:
    write_output(tmp_path / "j.xml", "a\udc80b")
    assert (tmp_path / "j.xml").read_text() == "a\\udc80b"


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_dev_stdout_redirected_to_a_file_is_appended_to_not_replaced(tmp_path: Path) -> None:
    """``fuseci run --junit /dev/stdout > log``: the log keeps what was printed before and after,
    and stays the file the shell opened."""
    log = tmp_path / "log"
    script = (
        "import sys; from pathlib import Path; from fuseci.files.outputs import write_output\n"
        "print('before', flush=True); write_output(Path('/dev/stdout'), 'report\\n'); print('after')\n"
    )
    with log.open("w") as out:
        inode = os.fstat(out.fileno()).st_ino
        subprocess.run([sys.executable, "-c", script], stdout=out, check=True, cwd=ROOT)
    assert log.read_text() == "before\nreport\nafter\n" and log.stat().st_ino == inode
    assert _files(tmp_path) == ["log"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_dev_stdout_as_a_pipe() -> None:
    script = "from pathlib import Path; from fuseci.files.outputs import write_output; write_output(Path('/dev/stdout'), 'r\\n')"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=ROOT)
    assert (done.returncode, done.stdout, done.stderr) == (0, "r\n", "")


def test_same_file_sees_through_links_and_dots(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", "{}")
    (tmp_path / "l.json").symlink_to(a)
    os.link(a, tmp_path / "h.json")
    assert same_file(tmp_path / "l.json", a) and same_file(tmp_path / "h.json", a)
    assert same_file(tmp_path / "x" / ".." / "a.json", a)
    assert same_file(tmp_path / "new.json", tmp_path / "." / "new.json")  # neither exists yet
    assert not same_file(tmp_path / "new.json", a)
    assert not same_file(a, f"{a}\0") and not same_file(tmp_path / "n\0.json", tmp_path / "n\0.json")


# --- outputs that are inputs ------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the suites, baselines and the regressed report (with its record) to run in."""
    shutil.copytree(ROOT / "suites", tmp_path / "suites")
    shutil.copytree(ROOT / "baselines", tmp_path / "baselines")
    (tmp_path / "r").mkdir()
    shutil.copy(REGRESSED_REPORT, tmp_path / "r" / "elementwise.ncu-rep.xz")
    shutil.copy(
        REGRESSED_REPORT.with_name("elementwise-regressed.harness.json"), tmp_path / "r" / "elementwise.harness.json"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))  # the kernels package the suites name
    return tmp_path


@pytest.mark.parametrize(
    ("option", "target", "what"),
    [
        ("--junit", "baselines/nvidia-h200/elementwise.json", "a baseline of suite 'elementwise'"),
        ("--json", "baselines/nvidia-h100-80gb-hbm3/elementwise.json", "a baseline of suite 'elementwise'"),
        ("--markdown", "suites/elementwise.yaml", "the suite file of 'elementwise'"),
        ("--json", "r/elementwise.harness.json", "the harness record of the report being re-analysed"),
        ("--junit", "r/elementwise.ncu-rep.xz", "the report being re-analysed"),
        ("--junit", "baselines/../suites/./elementwise.yaml", "the suite file of 'elementwise'"),
    ],
)
def test_run_refuses_an_output_that_is_an_input(tree: Path, option: str, target: str, what: str) -> None:
    before = _snapshot(tree)
    result = invoke("run", SUITE, "--from-report", "r/elementwise.ncu-rep.xz", option, target)
    assert result.exit_code == 3, result.output
    assert result.stdout == ""  # refused before anything was measured
    assert result.stderr == (
        f"fuseci: error: {_shown(target)}: is {what} ({target if 'baselines' in what else _given(target)}); {option} would "
        "replace it: fuseci never writes a report over a file it reads or keeps, choose another path\n"
    )
    assert _snapshot(tree) == before


def _given(target: str) -> str:
    return {"baselines/../suites/./elementwise.yaml": SUITE}.get(target, target)


def _shown(target: str) -> str:
    return str(Path(target))


def test_run_refuses_an_output_linked_to_an_input(tree: Path) -> None:
    (tree / "j.xml").symlink_to(tree / "baselines" / "nvidia-h200" / "elementwise.json")
    os.link(tree / "suites" / "elementwise.yaml", tree / "hard.xml")
    before = _snapshot(tree)
    for out in ("j.xml", "hard.xml"):
        result = invoke("run", SUITE, "--from-report", "r/elementwise.ncu-rep.xz", "--junit", out)
        assert result.exit_code == 3 and "--junit would replace it" in result.stderr
    assert _snapshot(tree) == before and (tree / "j.xml").is_symlink()


def test_profiled_runs_refuse_the_report_directory_files(tree: Path) -> None:
    result = invoke("run", SUITE, "--report-dir", "out", "--json", "out/elementwise.harness.json")
    assert result.exit_code == 3 and "a harness record of 'elementwise'" in result.stderr
    assert not (tree / "out").exists()  # nothing was profiled


def test_two_options_naming_one_file_is_a_usage_error(tree: Path) -> None:
    result = invoke("run", SUITE, "--from-report", "r/elementwise.ncu-rep.xz", "--junit", "x", "--json", "./x")
    assert result.exit_code == 2 and "--junit and --json both name x: give each report its own file" in result.stderr
    assert not (tree / "x").exists()


def test_merge_and_compare_refuse_their_inputs(tree: Path) -> None:
    assert invoke("run", SUITE, "--from-report", "r/elementwise.ncu-rep.xz", "--json", "res.json").exit_code == 1
    assert invoke("run", SUITE, "--from-report", "r/elementwise.ncu-rep.xz", "--results-dir", "runs").exit_code == 1
    (run,) = (tree / "runs").iterdir()
    before = _snapshot(tree)
    merged = invoke("merge", "res.json", "--markdown", "res.json")
    assert merged.exit_code == 3 and "is a results file being merged" in merged.stderr
    compared = invoke("compare", "runs", run, "--json", f"runs/{run.name}")
    assert compared.exit_code == 3 and "is run A" in compared.stderr
    suites = invoke("compare", run, run, SUITE, "--junit", SUITE)
    assert suites.exit_code == 3 and "the suite file of 'elementwise'" in suites.stderr
    assert _snapshot(tree) == before


def test_bench_refuses_its_suite(tree: Path) -> None:
    result = invoke("bench", SUITE, "--json", SUITE)
    assert result.exit_code == 3 and "the suite file of 'elementwise'" in result.stderr


def test_a_merged_report_never_replaces_a_baseline_it_names(tree: Path) -> None:
    """merge reads results files only, but the baselines they were judged against are kept files,
    wherever they are (those under ./baselines are refused before anything is read)."""
    shutil.move(tree / "baselines", tree / "elsewhere")
    run = invoke(
        "run", SUITE, "--from-report", "r/elementwise.ncu-rep.xz", "--baselines", "elsewhere", "--json", "res.json"
    )
    assert run.exit_code == 1, run.output
    before = _snapshot(tree)
    result = invoke("merge", "res.json", "--junit", "elsewhere/nvidia-h200/elementwise.json")
    assert result.exit_code == 1, result.output  # the regression stays the exit code
    assert "the baseline suite 'elementwise' was judged against" in result.stderr
    assert _snapshot(tree) == before


@pytest.mark.parametrize("out", ["/dev/null", "/dev/stdout"])
def test_run_writes_to_devices(in_root, out: str) -> None:
    result = invoke("run", SUITE, "--from-report", CLEAN_REPORT, "--junit", out)
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_doctor_json_to_dev_null(monkeypatch: pytest.MonkeyPatch) -> None:
    from fuseci.doctor.diagnosis import Check, CheckStatus, Diagnosis

    diagnosis = Diagnosis(checks=(Check("fuseci", CheckStatus.OK, "fuseci 0.1.0"),))
    monkeypatch.setattr("fuseci.doctor.diagnose", lambda options: diagnosis)
    result = invoke("doctor", "--json", "/dev/null")
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


# --- property: whatever the text and whatever is at the path ----------------------------------------

KINDS = ["new", "regular", "link", "dangling link", "dev null", "fifo"]


@pytest.fixture(scope="module")
def playground(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("outputs")


def _prepare(root: Path, kind: str) -> tuple[Path, Path | None]:
    """A fresh directory with ``kind`` at ``out``; the file a write must land in (None: a device)."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    out = root / "out.xml"
    if kind == "regular":
        out.write_text("old")
    elif kind == "link":
        (root / "target.xml").write_text("old")
        out.symlink_to(root / "target.xml")
        return out, root / "target.xml"
    elif kind == "dangling link":
        out.symlink_to(root / "made.xml")
        return out, root / "made.xml"
    elif kind == "dev null":
        return Path("/dev/null"), None
    elif kind == "fifo":
        os.mkfifo(out)
        return out, None
    return out, out


@fuzz_settings(300)
@given(text=st.text(st.characters(codec=None, exclude_categories=())), kind=st.sampled_from(KINDS))
def test_write_output_writes_the_text_and_replaces_nothing_else(playground: Path, text: str, kind: str) -> None:
    root = playground / "p"
    out, lands = _prepare(root, kind)
    expected = text.encode("utf-8", "backslashreplace")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(out.read_bytes())) if kind == "fifo" else None
    if reader:
        reader.start()
    write_output(out, text)
    if reader:
        reader.join(10)
        assert got == [expected] and stat.S_ISFIFO(os.lstat(out).st_mode)
    if lands is not None:
        assert lands.read_bytes() == expected
    if kind in ("link", "dangling link"):
        assert out.is_symlink()
    if kind == "dev null":
        assert stat.S_ISCHR(os.stat(out).st_mode)
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


# --- every command checks every output against every input ---------------------------------------


def _runs(tree: Path) -> list[Path]:
    for report in ("r/elementwise.ncu-rep.xz", CLEAN_REPORT):
        assert invoke("run", SUITE, "--from-report", report, "--results-dir", "runs").exit_code in (0, 1)
    return sorted((tree / "runs").iterdir())


def test_history_never_writes_its_page_over_a_file_it_reads(tree: Path) -> None:
    older, newer = _runs(tree)
    before = _snapshot(tree)
    for args, what in (
        (("runs", "--html", newer), "a run file of the results directory"),
        (("runs", "--last", "1", "--html", f"runs/../runs/{older.name}"), "a run file of the results directory"),
        (("runs", SUITE, "--html", SUITE), "the suite file of 'elementwise'"),
    ):
        result = invoke("history", *args)
        assert result.exit_code == 3, result.output
        assert result.stdout == ""  # refused before anything was read or printed
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"fuseci: error: {args[-1]}: is {what} (")
        assert line.endswith(
            "--html would replace it: fuseci never writes a report over a file it reads or keeps, choose another path"
        )
    assert _snapshot(tree) == before


def test_check_refuses_a_report_over_any_suite_file_it_reads(tree: Path) -> None:
    (tree / "suites" / "broken.yaml").write_text("suite: broken\ncases: [\n")
    before = _snapshot(tree)
    result = invoke("check", "suites/broken.yaml", SUITE, "--junit", SUITE)  # the valid one of the two
    assert result.exit_code == 3, result.output
    assert "fuseci: error: suites/elementwise.yaml: is the suite file of 'elementwise'" in result.stderr
    assert _snapshot(tree) == before


def test_the_step_summary_is_an_output_like_any_other(tree: Path) -> None:
    before = _snapshot(tree)
    env = {"GITHUB_STEP_SUMMARY": str(tree / SUITE)}
    result = invoke("run", SUITE, "--from-report", "r/elementwise.ncu-rep.xz", env=env)
    assert result.exit_code == 3, result.output
    assert result.stdout == ""  # refused before anything was measured
    assert result.stderr.startswith(f"fuseci: error: {tree / SUITE}: is the suite file of 'elementwise' ({SUITE}); ")
    assert "$GITHUB_STEP_SUMMARY would replace it" in result.stderr
    merged = invoke("merge", "x.json", "--markdown", "summary.md", env={"GITHUB_STEP_SUMMARY": "./summary.md"})
    assert merged.exit_code == 2 and "--markdown and $GITHUB_STEP_SUMMARY both name" in merged.stderr
    assert _snapshot(tree) == before


def test_compare_protects_every_run_file_of_a_directory_it_is_given(tree: Path) -> None:
    older, _ = _runs(tree)
    before = _snapshot(tree)
    result = invoke("compare", "runs", "runs", SUITE, "--json", older)  # only the newest is judged
    assert result.exit_code == 3 and f"{older}: is a run file of the results directory" in result.stderr
    assert _snapshot(tree) == before


def test_update_baselines_checks_the_baseline_against_its_inputs(tree: Path) -> None:
    """A suite file where the baseline would go (here a suite in JSON, which YAML reads) is
    refused as an input, before the old baseline is read."""
    suite = tree / "b" / "nvidia-h200" / "elementwise.json"
    suite.parent.mkdir(parents=True)
    text = json.dumps(_numbers(yaml.safe_load((tree / SUITE).read_text())))
    suite.write_text(re.sub(r"([0-9])e", r"\1.0e", text))  # YAML 1.1 reads 1e-05 as a string, 1.0e-05 as a number
    before = _snapshot(tree)
    result = invoke(
        "update-baselines",
        "b/nvidia-h200/elementwise.json",
        "--baselines",
        "b",
        "--from-report",
        "r/elementwise.ncu-rep.xz",
        "--force",
    )
    assert result.exit_code == 3, result.output
    assert (
        f"fuseci: error: {Path('b/nvidia-h200/elementwise.json')}: is the suite file of 'elementwise'" in result.stderr
    )
    assert "update-baselines would replace it" in result.stderr
    assert _snapshot(tree) == before


def _numbers(value):
    """A YAML document as JSON keeps it: ``1e-05``, a string to YAML 1.1, is a number."""
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    if isinstance(value, str) and re.fullmatch(r"-?[0-9.]+e[-+]?[0-9]+", value):
        return float(value)
    return value


# --- outputs that cannot be written: an error, never a hang, never a pass --------------------------


def _release(fifo: Path) -> None:
    """Open a FIFO for reading and close it, so that a writer a test left waiting on it goes on."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))


@pytest.fixture
def short_fifo_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fuseci.files.outputs.FIFO_WAIT_S", 0.3)


def test_a_fifo_nobody_reads_is_an_error_not_a_hang(tmp_path: Path, short_fifo_wait) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    try:
        with pytest.raises(OSError, match="no process reads it"):
            _within(10, write_output, fifo, "report\n")
    finally:
        _release(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_whose_reader_stops_reading_is_an_error_not_a_hang(tmp_path: Path, short_fifo_wait) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open, never read: the pipe fills up
    try:
        with pytest.raises(OSError, match="stopped reading"):
            _within(10, write_output, fifo, "x" * (4 << 20))
    finally:
        os.close(reader)


@pytest.mark.parametrize("regressed", [False, True])
def test_html_to_a_fifo_nobody_reads(in_root, tmp_path: Path, short_fifo_wait, regressed: bool) -> None:
    fifo = tmp_path / "page.html"
    os.mkfifo(fifo)
    report = REGRESSED_REPORT if regressed else CLEAN_REPORT
    try:
        result = _within(60, invoke, "run", SUITE, "--from-report", report, "--html", fifo)
    finally:
        _release(fifo)
    assert result.exit_code == (1 if regressed else 3), result.output
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("fuseci: error: ")]
    assert line.startswith(f"fuseci: error: {fifo}: cannot write the html report: ")


@pytest.mark.parametrize("target", ["fifo", "/dev/full", "directory"])
@pytest.mark.parametrize("regressed", [False, True])
def test_a_step_summary_that_cannot_be_written(
    in_root, tmp_path: Path, short_fifo_wait, target: str, regressed: bool
) -> None:
    """An error line naming the file and an error annotation that carries the verdict; exit 3
    for a run that passed, and a regression's 1 stays 1."""
    path = {"fifo": tmp_path / "summary", "/dev/full": Path("/dev/full"), "directory": tmp_path}[target]
    if target == "fifo":
        os.mkfifo(path)
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(path), "NO_COLOR": "1"}
    report = REGRESSED_REPORT if regressed else CLEAN_REPORT
    try:
        result = _within(60, lambda: invoke("run", SUITE, "--from-report", report, env=env))
    finally:
        if target == "fifo":
            _release(path)
    assert result.exit_code == (1 if regressed else 3), result.output
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("fuseci: error: ")]
    assert line.startswith(f"fuseci: error: {path}: cannot append the step summary ($GITHUB_STEP_SUMMARY): ")
    verdict = (
        "1 variant regressed: 11 checks; 9 variants pass: 72 checks; exit 1"
        if regressed
        else "10 variants pass: 88 checks; exit 3"
    )
    (annotation,) = [a for a in result.stdout.splitlines() if a.startswith("::error title=fuseci")]
    assert "cannot append the step summary" in annotation and annotation.endswith(verdict)
    errors = [a for a in result.stdout.splitlines() if a.startswith("::error")]
    assert errors[0] == annotation and len(errors) <= 10  # first, within what GitHub shows


def test_a_full_disk_under_a_report_is_an_error(in_root, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    result = invoke("run", SUITE, "--from-report", CLEAN_REPORT, "-q", "--html", tmp_path / "r.html")
    assert result.exit_code == 3, result.output
    assert result.stderr == (
        f"fuseci: error: {tmp_path / 'r.html'}: cannot write the html report: No space left on device\n"
    )
    assert _files(tmp_path) == []


# --- what fuseci keeps, whether the command reads it or not -------------------------------------


@pytest.mark.parametrize(
    ("target", "what"),
    [
        ("baselines/nvidia-h200/stencil.json", "a baseline"),  # another suite's: not read by this run
        ("suites/stencil.yaml", "a suite file"),
    ],
)
def test_every_command_refuses_a_report_over_a_file_fuseci_keeps(tree: Path, target: str, what: str) -> None:
    assert invoke("run", SUITE, "--from-report", "r/elementwise.ncu-rep.xz", "--json", "res.json").exit_code == 1
    (run,) = _runs(tree)[-1:]
    before = _snapshot(tree)
    commands = [
        ("run", SUITE, "--from-report", "r/elementwise.ncu-rep.xz", "--json", target),
        ("check", SUITE, "--junit", target),
        ("compare", run, run, SUITE, "-q", "--markdown", target),
        ("merge", "res.json", "--html", target),
        ("history", "runs", "--html", target),
        ("bench", SUITE, "--json", target),
        ("doctor", "--json", target),
    ]
    for args in commands:
        result = invoke(*args)
        assert result.exit_code == 3, (args, result.output)
        assert result.stdout == "", args  # refused before anything was measured, read or printed
        lines = result.stderr.splitlines()
        assert len(lines) == 1, (args, result.stderr)
        line = lines[0]
        assert line.startswith(f"fuseci: error: {target}: is {what} ("), (args, line)
        assert "would replace it: fuseci never writes a report over a file it reads or keeps" in line
    assert _snapshot(tree) == before


def test_run_refuses_a_report_over_a_run_file_of_its_results_directory(tree: Path) -> None:
    (older, _) = _runs(tree)
    before = _snapshot(tree)
    result = invoke("run", SUITE, "--from-report", CLEAN_REPORT, "--results-dir", "runs", "--junit", older)
    assert result.exit_code == 3 and result.stdout == "", result.output
    assert f"{older}: is a run file of the results directory" in result.stderr
    assert _snapshot(tree) == before


def test_the_baselines_given_are_kept_too(tree: Path) -> None:
    shutil.copytree(tree / "baselines", tree / "b")
    before = _snapshot(tree)
    target = "b/nvidia-h100-80gb-hbm3/stencil.json"
    result = invoke("run", SUITE, "--from-report", "r/elementwise.ncu-rep.xz", "--baselines", "b", "--json", target)
    assert result.exit_code == 3 and f"fuseci: error: {target}: is a baseline (" in result.stderr
    assert _snapshot(tree) == before
