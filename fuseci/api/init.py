"""``fuseci init``: a starter suite, the workflow that runs fuseci's Action, actionlint's runner labels and
the report directory in ``.gitignore``, written without overwriting, after every option and target is checked
and every YAML document read back as meant; a write that fails midway removes what this run wrote."""

from __future__ import annotations

import contextlib
import fnmatch
import json
import math
import os
import re
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import yaml

from fuseci import validation
from fuseci.config import names
from fuseci.config.resolve import ModuleFinder, parameters, resolve
from fuseci.config.yaml_loader import parse_yaml
from fuseci.errors import SuiteError, UsageError

#: The placeholder shape of every input: 64 Mi elements, 256 MiB in float32, over 4x an H200's L2
PLACEHOLDER_SHAPE = 1 << 26
#: Where the written files go, relative to the repository.
SUITES_DIR = Path("suites")
WORKFLOW = Path(".github/workflows/fuseci.yml")
ACTIONLINT = Path(".github/actionlint.yaml")
GITIGNORE = Path(".gitignore")
#: Largest .gitignore or actionlint.yaml read.
MAX_READ_BYTES = 1 << 20
_SCALARS = {"float": 1.0, "int": 1, "bool": True}
_ID = re.compile(r"[^A-Za-z0-9_-]+")
#: ``owner/name@ref`` or ``owner/name/path@ref``, as GitHub names repositories and refs; or ``./path``.
_ACTION = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}(?:/[A-Za-z0-9._-]+)*@[A-Za-z0-9._/-]{1,255}"
    r"|\./[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*"
)
#: A string that may be written plain, if it reads back as itself: it starts with a letter.
_PLAIN_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./@:-]*")
#: A relative path of plain names: what a report directory may be.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?")
#: A GitHub repository, as git and pip name it (https or ssh).
_GITHUB = re.compile(r"(?:git\+)?(?:https://|ssh://git@|git@)github\.com[/:]([\w.-]+/[\w.-]+?)(?:\.git)?/?")


@dataclass(frozen=True, slots=True)
class InitOptions:
    """What ``fuseci init`` was asked for."""

    functions: tuple[str, ...]
    """``module:function`` references: the unfused variant first, then one or more fused ones."""
    root: Path = Path(".")
    """The repository written into."""
    suite: str | None = None
    """The suite id (None: the first function's top-level package)."""
    case: str | None = None
    """The case id (None: the first fused function's name without ``fused``)."""
    runner_labels: tuple[str, ...] = ("self-hosted", "gpu")
    """The labels of the GPU runner the workflow runs on."""
    report_dir: str = "fuseci-out"
    """The report directory: ignored by git, kept by the Action."""
    framework: str | None = None
    """``cupy`` or ``torch`` (None: torch when the functions' modules import torch and not CuPy)."""
    action: str | None = None
    """``owner/fuseci@ref`` of the Action (None: where the installed fuseci came from)."""
    workflow: Path = WORKFLOW
    """The workflow file, relative to the repository, in ``.github/workflows/``."""
    suite_only: bool = False
    """Write the suite alone: the repository has its workflow already."""


@dataclass(frozen=True, slots=True)
class Written:
    """One file ``fuseci init`` considered, and what it did with it."""

    path: Path
    """Relative to the repository."""
    status: Literal["written", "added", "exists"]
    """``written``: a new file; ``added``: lines added to an existing file; ``exists``: left as it was."""
    detail: str = ""
    """What it holds or lacks, in a few words."""


@dataclass(frozen=True, slots=True)
class Planned:
    """One file :func:`init` means to write."""

    path: Path
    """Relative to the repository."""
    text: str
    """A new file's text; for an ``append`` file, the lines it must hold."""
    how: Literal["new", "append", "unless-there"]
    """``new``: never over a file; ``append``: lines added, the file made if absent; ``unless-there``: if absent."""
    fix: str = ""
    """What to do when a ``new`` file is there."""
    note: str = ""
    """Said beside it once written."""


@dataclass(frozen=True, slots=True)
class _Function:
    ref: str
    names: tuple[str, ...]
    """Its keyword-passable parameters, in order."""
    scalars: dict[str, object]
    """Those that take a scalar: a literal finite default, or a float/int/bool annotation's placeholder."""
    optional: frozenset[str]
    """Those with a default."""
    open_ended: bool
    """It takes ``**kwargs``."""
    torch: bool
    """Its module imports torch and not CuPy."""


def _fail(ref: str, why: str, fix: str) -> SuiteError:
    return SuiteError(f"{ref}: {why}; {fix}")


def _read(ref: str, finder: ModuleFinder) -> _Function:
    """``ref``'s parameters from its module's source, nothing imported."""
    module, _, name = ref.partition(":")
    found = resolve(ref, finder)
    if found.problem or found.unverified:
        fix = (
            "run fuseci init from the repository's root, or install the package that holds it"
            if found.problem.startswith("no module")
            else "name a function its module defines"
        )
        raise _fail(ref, found.problem or found.unverified, fix)
    takes = parameters(ref, finder)
    if takes is None or takes.kernel:
        origin = finder.find(module).specs[-1].origin
        why = f"{module} ({origin}) names {name!r} but not as a def whose parameters its source shows"
        raise _fail(ref, why, "name the function it is (a def under no decorator that may change its parameters)")
    if takes.positional_only:
        raise _fail(ref, "takes positional-only parameters", "fuseci passes every input by keyword")
    literals = dict(takes.literals)
    kinds = {n: kind for n, kind, _ in takes.kinds}
    scalars: dict[str, object] = {}
    for n in takes.keywords:
        value = literals.get(n)
        if type(value) in (int, float, bool):
            if not (isinstance(value, float) and not math.isfinite(value)):  # nan, inf: left to the default
                scalars[n] = value
        elif n in takes.required and kinds.get(n) in _SCALARS:
            scalars[n] = _SCALARS[kinds[n]]
    return _Function(
        ref=ref,
        names=takes.keywords,
        scalars=scalars,
        optional=frozenset(takes.keywords) - frozenset(takes.required),
        open_ended=takes.open,
        torch="torch" in takes.module_imports and "cupy" not in takes.module_imports,
    )


def _slug(text: str, fallback: str) -> str:
    return _ID.sub("_", text).strip("_-") or fallback


def _variants(functions: Sequence[str]) -> list[tuple[str, str]]:
    out = [("unfused", functions[0])]
    for i, ref in enumerate(functions[1:]):
        vid = "fused" if i == 0 else _slug(ref.partition(":")[2], f"fused{i + 1}")
        while vid in {v for v, _ in out}:
            vid += "_2"
        out.append((vid, ref))
    return out


def scalar(value: object) -> str:
    """``value`` as one YAML scalar that YAML 1.1 and 1.2 read back as it, in a block or a flow: a string plain
    when a word that reads back as itself, else quoted; a number as PyYAML writes it (``1e-06`` is a 1.1 string)."""
    if isinstance(value, str):
        if _PLAIN_WORD.fullmatch(value) and _reads_as(value, value) and _reads_as(f"[{value}]", [value]):
            return value
        return json.dumps(value)
    if isinstance(value, (bool, int, float)):
        return yaml.safe_dump(value, default_flow_style=True).split("\n", 1)[0]
    raise TypeError(f"not a scalar: {value!r}")


def _reads_as(text: str, value: object) -> bool:
    try:
        return bool(yaml.safe_load(text) == value)
    except yaml.YAMLError:
        return False


def _read_back(what: str, text: str, wanted: dict[str, Any], within: Sequence[str] = ()) -> None:
    """Raise :class:`SuiteError` (a bug, said as one) unless ``text`` reads back as ``wanted`` (at ``within``)."""
    data: Any = parse_yaml(text, Path(what))
    for step in within:
        data = data.get(step) if isinstance(data, dict) else None
    if _plain(data) != _plain(wanted):
        raise SuiteError(
            f"{what}: fuseci init would write what YAML reads otherwise; nothing written (a bug: report it)"
        )


def _plain(data: object) -> object:
    if isinstance(data, dict):
        return {k: _plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return (type(data), data)  # 1 and 1.0 and True told apart


def _suite_text(options: InitOptions, read: list[_Function], torch: bool) -> tuple[str, str]:
    """The suite's id and its YAML (:class:`SuiteError`: variants with other parameters, or no array)."""
    refs = [f.ref for f in read]
    taken = dict.fromkeys(n for f in read for n in f.names if n not in f.optional)
    for f in read:  # an optional scalar every variant takes: its default, to edit
        taken.update(
            (n, None)
            for n in f.names
            if n in f.optional and n in f.scalars and all(n in g.names or g.open_ended for g in read)
        )
    for f in read:
        missing = [n for n in taken if n not in f.names and not f.open_ended]
        if missing:
            raise _fail(
                f.ref,
                f"takes no parameter {', '.join(map(repr, missing))} that another variant takes",
                "the variants of a case are called with the same inputs: give them the same parameters",
            )
    scalars: dict[str, object] = {}
    for f in read:  # the first variant's value of each
        scalars.update({n: v for n, v in f.scalars.items() if n in taken and n not in scalars})
    inputs = [n for n in taken if n not in scalars]
    if not inputs:
        raise _fail(refs[0], "takes no array parameter", "name functions that take the arrays they fuse over")
    suite = options.suite or _slug(refs[0].partition(":")[0].split(".")[0], "mysuite")
    case = options.case or _slug(re.sub(r"(^|_)fused(_|$)", r"\1", refs[1].partition(":")[2]).strip("_"), "case1")
    description = f"Fusions of {refs[0].partition(':')[0]} (say what they fuse)."
    variants = dict(_variants(refs))
    wanted: dict[str, Any] = {
        "suite": suite,
        "description": description,
        "defaults": {**({"framework": "torch"} if torch else {}), "dtype": "float32", "distribution": "normal"},
        "cases": [
            {
                "id": case,
                "inputs": {n: {"shape": [PLACEHOLDER_SHAPE]} for n in inputs},
                **({"params": scalars} if scalars else {}),
                "variants": variants,
            }
        ],
    }
    lines = [
        "# Written by `fuseci init`. The shapes are placeholders: make them the sizes you care about",
        "# (each input over the GPU's L2 shows what fusion saves in DRAM), add a reference and",
        "# expectations, then `fuseci check`. The format: fuseci's docs/SUITES.md.",
        f"suite: {scalar(suite)}",
        f"description: {scalar(description)}",
        "",
        "defaults:",
        *(["  framework: torch"] if torch else []),
        "  dtype: float32",
        "  distribution: normal",
        "",
        "cases:",
        f"  - id: {scalar(case)}",
        "    inputs:                        # placeholder shapes: edit them",
        *(f"      {scalar(n)}: {{shape: [{PLACEHOLDER_SHAPE}]}}" for n in inputs),
    ]
    if scalars:
        values = ", ".join(f"{scalar(n)}: {scalar(v)}" for n, v in scalars.items())
        lines.append(f"    params: {{{values}}}   # the functions' defaults, else placeholders")
    lines.append("    variants:")
    lines += [f"      {scalar(vid)}: {scalar(ref)}" for vid, ref in variants.items()]
    text = "\n".join(lines) + "\n"
    _read_back(f"suites/{suite}.yaml", text, wanted)
    return suite, text


def installed_action() -> str | None:
    """``owner/fuseci@commit`` of the installed fuseci when pip installed it from a GitHub repository,
    or a local clone of one (PEP 610's ``direct_url.json``); else None."""
    try:
        text = metadata.distribution("fuseci").read_text("direct_url.json")
        origin = json.loads(text) if text else {}
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None
    if not isinstance(origin, dict) or not isinstance(origin.get("vcs_info"), dict):
        return None
    commit = str(origin["vcs_info"].get("commit_id") or "")
    url = str(origin.get("url", ""))
    if url.startswith("file:"):
        url = _clone_origin(Path(unquote(urlsplit(url).path)))
    m = _GITHUB.fullmatch(url)
    if m is None or not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None
    return f"{m.group(1)}@{commit}"


def _clone_origin(clone: Path) -> str:
    """The ``origin`` remote's URL of a local clone, read from its git config, or ``""``."""
    config = clone / ".git" / "config"
    try:
        text = config.read_text(encoding="utf-8", errors="replace")[:MAX_READ_BYTES]
    except OSError:
        return ""
    section = re.search(r'^\s*\[remote "origin"\]\s*$(.*?)(?=^\s*\[|\Z)', text, re.M | re.S)
    url = re.search(r"^\s*url\s*=\s*(\S+)\s*$", section.group(1), re.M) if section else None
    return url.group(1) if url else ""


def _workflow_text(options: InitOptions, suite_path: Path, action: str, torch: bool) -> str:
    labels = ", ".join(scalar(label) for label in options.runner_labels)
    extras = "torch" if torch else "cuda12"
    extras_note = "" if torch else "  # CuPy for CUDA 12; cuda13 on a CUDA 13 driver stack"
    pr_if = "github.event_name != 'pull_request' || github.event.pull_request.head.repo.full_name == github.repository"
    text = f"""name: fuseci

# Written by `fuseci init`. On a pull request fuseci judges the pull request against its base
# commit measured now on the same runner (fuseci ab); on a push, against the stored baselines
# (fuseci run), and keeps the run for `fuseci history`. Safety: a pull request from a fork never
# reaches the self-hosted runner (the job's `if:`): its code would run on your machine.

on:
  push:
    branches: [main]
  pull_request:
  workflow_dispatch:

permissions:
  contents: read

concurrency:
  group: fuseci-${{{{ github.ref }}}}
  cancel-in-progress: true

jobs:
  fuseci:
    if: {pr_if}
    runs-on: [{labels}]
    timeout-minutes: 60
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0  # the pull request's base commit, for fuseci ab
      - uses: {scalar(action)}
        with:
          suites: {scalar(suite_path.as_posix())}
          extras: {extras}{extras_note}
          report-dir: {scalar(options.report_dir)}
"""
    job = {
        "if": pr_if,
        "runs-on": list(options.runner_labels),
        "timeout-minutes": 60,
        "steps": [
            {"uses": "actions/checkout@v4", "with": {"fetch-depth": 0}},
            {
                "uses": action,
                "with": {"suites": suite_path.as_posix(), "extras": extras, "report-dir": options.report_dir},
            },
        ],
    }
    _read_back(options.workflow.as_posix(), text, {"fuseci": job}, ["jobs"])
    return text


def _actionlint_text(labels: Sequence[str]) -> str:
    lines = [
        "# Written by `fuseci init`: the labels of the self-hosted GPU runner, for actionlint.",
        "self-hosted-runner:",
        "  labels:",
        *(f"    - {scalar(label)}" for label in labels),
    ]
    text = "\n".join(lines) + "\n"
    _read_back(ACTIONLINT.as_posix(), text, {"self-hosted-runner": {"labels": list(labels)}})
    return text


def _label_problem(label: str) -> str:
    """Why a workflow cannot hold ``label`` as a runner label, or ``""``."""
    if not label.strip():
        return "an empty runner label"
    if any(ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029\ufeff" for c in label):
        return f"runner label {label!r} holds a control character"
    if "," in label:
        return f"runner label {label!r} holds a comma, which separates labels"
    if "${{" in label:
        return f"runner label {label!r} holds ${{{{, which a workflow reads as an expression"
    if label != label.strip() or len(label) > 100:
        return f"runner label {label!r} starts or ends with a space, or is over 100 characters"
    return ""


def _option_problems(options: InitOptions) -> list[str]:
    """Each option a workflow, a suite or a path cannot take: one line each."""
    problems: list[str] = []
    if len(options.functions) < 2:
        problems.append(
            f"fuseci init: {len(options.functions)} function(s) named; name the unfused function, "
            "then one or more fused ones (package.module:function)"
        )
    for ref in options.functions:
        module, sep, name = ref.partition(":")
        if not (sep and module and all(p.isidentifier() for p in module.split(".")) and name.isidentifier()):
            problems.append(f"{ref!r}: not a module:function reference; name each function as package.module:function")
    problems += [
        f"--runner-label: {why}; name the label the runner was registered with"
        for why in map(_label_problem, options.runner_labels)
        if why
    ]
    if not options.runner_labels:
        problems.append("--runner-label: none given; name the labels the GPU runner was registered with")
    for flag, value in (("--suite", options.suite), ("--case", options.case)):
        if value is not None and not names.is_id(value):
            problems.append(
                f"{flag} {value!r}: not an id; use letters, digits, '_' and '-' (at most {validation.MAX_ID_CHARS})"
            )
    report = options.report_dir
    if not _PLAIN_PATH.fullmatch(report) or {".", ".."} & set(report.strip("/").split("/")):
        problems.append(
            f"--report-dir {report!r}: not a plain path inside the repository; use names of letters, digits, "
            "'_', '.' and '-' separated by '/', such as fuseci-out"
        )
    if options.action is not None and (not _ACTION.fullmatch(options.action) or ".." in options.action):
        problems.append(
            f"--action {options.action!r}: not an Action reference; name it as owner/fuseci@ref "
            "(a tag or a commit of the repository you install fuseci from)"
        )
    wf = options.workflow
    if wf.is_absolute() or wf.parent != WORKFLOW.parent or wf.suffix not in (".yml", ".yaml") or wf.stem in ("", "."):
        problems.append(
            f"--workflow {wf.as_posix()}: GitHub runs only the .yml and .yaml files of "
            f"{WORKFLOW.parent.as_posix()}/; name one there, such as {WORKFLOW.as_posix()}"
        )
    elif not _PLAIN_PATH.fullmatch(wf.name):
        problems.append(f"--workflow {wf.as_posix()!r}: use letters, digits, '_', '.' and '-' in its name")
    return problems


def plan(options: InitOptions) -> list[Planned]:
    """What :func:`init` writes, in order.

    Raises:
        UsageError: an option a workflow, a suite or a path cannot take, or no Action known.
        SuiteError: a function that cannot be found or read, or variants with other parameters.
    """
    problems = _option_problems(options)
    action = options.action or (None if options.suite_only else installed_action())
    if action is None and not options.suite_only and not problems:
        problems.append(
            "--action: not given, and the installed fuseci does not say which repository it came from (installed "
            "from a wheel, an index or a checkout): pass --action OWNER/fuseci@REF, the repository and the tag or "
            "commit you install fuseci from, or install fuseci from its git repository (docs/ADOPT.md, step 1)"
        )
    if problems:
        raise UsageError("\n".join(problems))
    root = options.root.resolve()
    finder = ModuleFinder([root, *(p for p in sys.path if p)])
    read = [_read(ref, finder) for ref in options.functions]
    torch = options.framework == "torch" if options.framework else all(f.torch for f in read)
    suite, text = _suite_text(options, read, torch)
    suite_path = SUITES_DIR / f"{suite}.yaml"
    out = [Planned(suite_path, text, "new", "remove it, or pass --suite ID for another suite (suites/ID.yaml)")]
    if options.suite_only:
        return out
    fix = "remove it, pass --workflow FILE for another workflow in .github/workflows/, or --suite-only"
    out.append(Planned(options.workflow, _workflow_text(options, suite_path, str(action), torch), "new", fix))
    labels = [label for label in options.runner_labels if label != "self-hosted"]
    if "self-hosted" in options.runner_labels and labels:
        out.append(Planned(ACTIONLINT, _actionlint_text(labels), "unless-there"))
    out.append(Planned(GITIGNORE, f"{options.report_dir.rstrip('/')}/\n", "append"))
    return out


def _kind_of(mode: int) -> str:
    kinds = {"-": "a file", "d": "a directory", "p": "a FIFO", "c": "a device", "b": "a device", "s": "a socket"}
    return kinds.get(stat.filemode(mode)[0], "not a regular file")


def _stat_inside(path: Path, shown: str, real_root: Path) -> tuple[os.stat_result | None, str]:
    """``path``'s stat, following a link that stays inside the repository; None when absent."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            real = Path(os.path.realpath(path))
            if real != real_root and not real.is_relative_to(real_root):
                where = f"{shown}: a link out of the repository (to {real}); fuseci init writes only inside it"
                return None, f"{where}: make it a file or directory of the repository, or remove it"
            st = os.stat(path)
    except FileNotFoundError:
        return None, "" if not path.is_symlink() else f"{shown}: a link to nothing; remove it"
    except OSError as exc:
        return None, f"{shown}: cannot be read: {exc.strerror or exc}"
    return st, ""


def _read_target(path: Path) -> str:
    """A regular file's text, opened without waiting (a FIFO never blocks); else OSError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{_kind_of(os.fstat(fd).st_mode)}, not a regular file")
        raw = f.read(MAX_READ_BYTES + 1)
    if len(raw) > MAX_READ_BYTES:
        raise OSError(f"over {MAX_READ_BYTES >> 20} MiB")
    return raw.decode("utf-8", errors="surrogateescape")


def _check_targets(root: Path, planned: Sequence[Planned]) -> dict[Path, str]:
    """The text of each existing ``append`` or ``unless-there`` file; SuiteError: a line per unwritable target."""
    problems: list[str] = []
    held: dict[Path, str] = {}
    if not root.is_dir():
        raise SuiteError(f"{root}: not a directory; pass --root DIR, the repository to write into")
    real_root = root.resolve()
    for p in planned:
        why = ""
        for depth in range(1, len(p.path.parts)):
            rel = Path(*p.path.parts[:depth])
            st, why = _stat_inside(root / rel, rel.as_posix(), real_root)
            if why or st is None:
                break
            if not stat.S_ISDIR(st.st_mode):
                why = f"{rel.as_posix()}: {_kind_of(st.st_mode)} where a directory goes; move it away"
                break
        st, why = (None, why) if why else _stat_inside(root / p.path, p.path.as_posix(), real_root)
        if not why and st is not None:
            if p.how == "new":
                why = f"{p.path.as_posix()}: exists (fuseci init never replaces a file: nothing written); {p.fix}"
            elif not stat.S_ISREG(st.st_mode):
                why = f"{p.path.as_posix()}: {_kind_of(st.st_mode)}, not a regular file; make it one, or remove it"
            else:
                try:
                    held[p.path] = _read_target(root / p.path)
                except OSError as exc:
                    why = f"{p.path.as_posix()}: cannot be read: {exc.strerror or exc}"
        if why and why not in problems:
            problems.append(why)
    if problems:
        raise SuiteError("\n".join(problems))
    return held


def init(options: InitOptions) -> list[Written]:
    """Write what :func:`plan` says, never replacing a file; ``.gitignore`` gets the lines it lacks.

    Raises:
        UsageError: as :func:`plan`.
        SuiteError: as :func:`plan`, or a target that cannot be written (before any write).
        OSError: a file cannot be written (what this run wrote is removed).
    """
    planned = plan(options)
    held = _check_targets(options.root, planned)
    if options.suite_only:
        planned = [_with_note(options, planned[0])]
    made: list[Path] = []  # files and directories, in the order made
    try:
        return [_write(options.root, p, held.get(p.path), made) for p in planned]
    except BaseException:
        for path in reversed(made):
            with contextlib.suppress(OSError):  # a directory someone filled meanwhile is kept
                path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
        raise


def _write(root: Path, p: Planned, held: str | None, made: list[Path]) -> Written:
    for depth in range(1, len(p.path.parts)):
        directory = root / Path(*p.path.parts[:depth])
        if not directory.is_dir():
            directory.mkdir()
            made.append(directory)
    path = root / p.path
    if held is None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags, 0o666)  # never over one made meanwhile
        made.append(path)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(p.text)
        return Written(p.path, "written", p.text.strip() if p.how == "append" else p.note)
    if p.how == "unless-there":
        return Written(p.path, "exists", _declared(held, p.text))
    forms = {line.strip().strip("/") for line in held.splitlines()}
    wanted = p.text.splitlines()
    missing = [line for line in wanted if line.strip("/") not in forms]
    if not missing:
        return Written(p.path, "exists", f"already ignores {', '.join(wanted)}")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{p.path.as_posix()}: not a regular file")
        f.write(("\n" if held and not held.endswith("\n") else "") + "".join(f"{line}\n" for line in missing))
    return Written(p.path, "added", ", ".join(missing))


def _with_note(options: InitOptions, suite: Planned) -> Planned:
    """The suite, with a note on the workflow that is to run it (``--suite-only``)."""
    try:
        text = _read_target(options.root / options.workflow)
    except OSError:
        note = f"no workflow {options.workflow.as_posix()} to run it: run fuseci init without --suite-only for one"
    else:
        covered = suites_covered(text, suite.path)
        note = "" if covered else f"add it to the suites: input of {options.workflow.as_posix()}, which names others"
    return Planned(suite.path, suite.text, suite.how, suite.fix, note)


def _declared(held: str, wanted: str) -> str:
    """What an existing actionlint.yaml lacks of the labels wanted, in a few words."""
    labels = yaml.safe_load(wanted)["self-hosted-runner"]["labels"]
    try:
        data = yaml.safe_load(held)
        declared = data["self-hosted-runner"]["labels"] if isinstance(data, dict) else []
    except (yaml.YAMLError, KeyError, TypeError):
        declared = []
    lacking = [label for label in labels if label not in (declared if isinstance(declared, list) else [])]
    if not lacking:
        return "declares the runner labels"
    return f"lacks runner labels {', '.join(map(repr, lacking))}: add them to self-hosted-runner.labels"


def suites_covered(workflow_text: str, suite: Path) -> bool:
    """Whether a workflow's ``suites:`` inputs (none: every suites/*.yaml) take ``suite``."""
    given = re.findall(r"^\s*suites:\s*(.*?)\s*(?:#.*)?$", workflow_text, re.M)
    patterns = [p.strip("'\"") for g in given for p in g.split()] or [f"{SUITES_DIR.as_posix()}/*.yaml"]
    return any(fnmatch.fnmatch(suite.as_posix(), p) for p in patterns)
