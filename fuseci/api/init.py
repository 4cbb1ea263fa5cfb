"""``fuseci init``: what a repository needs to start with fuseci, written without overwriting.

Three things, none of them ever replaced:

- a starter suite, ``suites/<suite>.yaml``: one case whose variants are the functions named
  (the first the unfused one), its inputs and params read from the functions' source without
  importing it (:class:`fuseci.config.resolve.ModuleFinder`, as ``fuseci check`` finds modules),
  with placeholder shapes to edit;
- the workflow ``.github/workflows/fuseci.yml`` that runs fuseci's GitHub Action on the runner
  labels given, with the Action's extras for the functions' framework (``torch``, else CuPy's
  ``cuda12``);
- the report directory's line in ``.gitignore`` (added to the file if it lacks it; nothing else
  of the file changes).

A function that cannot be found or read, variants that take different parameters, a runner
label a workflow cannot hold, or a suite or workflow file that already exists raise
:class:`~fuseci.errors.SuiteError` (exit 3) before anything is written, ``.gitignore``
included: a second ``fuseci init`` names each file that is there and writes nothing.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from fuseci import __version__
from fuseci.config.resolve import ModuleFinder, resolve
from fuseci.errors import SuiteError

#: Where fuseci's GitHub Action lives when the installed fuseci does not say (a git install does).
ACTION_FALLBACK = f"OWNER/fuseci@v{__version__}"
#: The placeholder shape of every input: 64 Mi elements, 256 MiB in float32, over 4x an H200's L2
PLACEHOLDER_SHAPE = 1 << 26
#: Where the written files go, relative to the repository.
SUITES_DIR = Path("suites")
WORKFLOW = Path(".github/workflows/fuseci.yml")
GITIGNORE = Path(".gitignore")
_SCALARS = {"float": 1.0, "int": 1, "bool": True}
_ID = re.compile(r"[^A-Za-z0-9_-]+")


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


@dataclass(frozen=True, slots=True)
class Written:
    """One file ``fuseci init`` considered, and what it did with it."""

    path: Path
    """Relative to the repository."""
    status: Literal["written", "added", "exists"]
    """``written``: a new file; ``added``: lines added to an existing file; ``exists``: it held
    them already (only ``.gitignore``: an existing suite or workflow is an error)."""
    detail: str = ""
    """What it holds or lacks, in a few words."""


@dataclass(frozen=True, slots=True)
class _Function:
    ref: str
    names: tuple[str, ...]
    """Its keyword-passable parameters, in order."""
    scalars: dict[str, object]
    """Those that take a scalar: a literal number or bool default, or a float/int/bool annotation."""
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
    module, sep, name = ref.partition(":")
    if not sep or not module or not name.isidentifier():
        raise _fail(ref, "not a module:function reference", "name each function as package.module:function")
    found = resolve(ref, finder)
    if found.problem or found.unverified:
        fix = (
            "run fuseci init from the repository's root, or install the package that holds it"
            if found.problem.startswith("no module")
            else "name a function its module defines"
        )
        raise _fail(ref, found.problem or found.unverified, fix)
    origin = finder.find(module).specs[-1].origin
    tree = ast.parse(Path(str(origin)).read_bytes(), filename=str(origin))
    imports = {
        (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    top = [n for n in defs if n in tree.body] or defs
    if not top:
        raise _fail(ref, f"{module} ({origin}) names {name!r} but defines it without a def", "name the function it is")
    args = top[0].args
    if args.posonlyargs:
        raise _fail(ref, "takes positional-only parameters", "fuseci passes every input by keyword")
    positional = args.args
    with_default = [a.arg for a in positional][len(positional) - len(args.defaults) :]
    defaults: dict[str, ast.expr] = dict(zip(with_default, args.defaults, strict=True))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
    scalars: dict[str, object] = {}
    for arg in [*positional, *args.kwonlyargs]:
        default = defaults.get(arg.arg)
        if isinstance(default, ast.Constant) and type(default.value) in (int, float, bool):
            scalars[arg.arg] = default.value
        elif arg.annotation is not None and ast.unparse(arg.annotation) in _SCALARS:
            scalars[arg.arg] = _SCALARS[ast.unparse(arg.annotation)]
    return _Function(
        ref=ref,
        names=tuple(a.arg for a in [*positional, *args.kwonlyargs]),
        scalars=scalars,
        optional=frozenset(defaults),
        open_ended=args.kwarg is not None,
        torch="torch" in imports and "cupy" not in imports,
    )


def _slug(text: str, fallback: str) -> str:
    return _ID.sub("_", text).strip("_-") or fallback


def _case_id(fused: str) -> str:
    name = fused.partition(":")[2]
    return _slug(re.sub(r"(^|_)fused(_|$)", r"\1", name).strip("_"), "case1")


def _variants(functions: Sequence[str]) -> list[tuple[str, str]]:
    out = [("unfused", functions[0])]
    for i, ref in enumerate(functions[1:]):
        vid = "fused" if i == 0 else _slug(ref.partition(":")[2], f"fused{i + 1}")
        while vid in {v for v, _ in out}:
            vid += "_2"
        out.append((vid, ref))
    return out


def _is_torch(options: InitOptions, read: Sequence[_Function]) -> bool:
    """Whether the suite's functions take torch tensors: ``--framework``, else every function's
    module imports torch and not CuPy. The suite's ``framework`` and the Action's extras follow it."""
    return options.framework == "torch" if options.framework else all(f.torch for f in read)


def _suite_text(options: InitOptions, read: list[_Function], torch: bool) -> tuple[str, str]:
    """The suite's id and its YAML."""
    refs = [f.ref for f in read]
    taken: dict[str, None] = {}
    for f in read:
        taken.update((n, None) for n in f.names if n not in f.optional)
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
    for f in read:
        for n, v in f.scalars.items():
            if n in taken:
                scalars.setdefault(n, v)
    inputs = [n for n in taken if n not in scalars]
    if not inputs:
        raise _fail(refs[0], "takes no array parameter", "name functions that take the arrays they fuse over")
    suite = options.suite or _slug(refs[0].partition(":")[0].split(".")[0], "mysuite")
    case = options.case or _case_id(refs[1])
    lines = [
        "# Written by `fuseci init`. The shapes are placeholders: make them the sizes you care about",
        "# (each input over the GPU's L2 shows what fusion saves in DRAM), add a reference and",
        "# expectations, then `fuseci check`. The format: fuseci's docs/SUITES.md.",
        f"suite: {suite}",
        f"description: Fusions of {refs[0].partition(':')[0]} (say what they fuse).",
        "",
        "defaults:",
        *(["  framework: torch"] if torch else []),
        "  dtype: float32",
        "  distribution: normal",
        "",
        "cases:",
        f"  - id: {case}",
        "    inputs:                        # placeholder shapes: edit them",
        *(f"      {n}: {{shape: [{PLACEHOLDER_SHAPE}]}}" for n in inputs),
    ]
    if scalars:
        values = ", ".join(f"{n}: {json.dumps(v)}" for n, v in scalars.items())
        lines.append(f"    params: {{{values}}}   # the functions' defaults, else placeholders")
    lines.append("    variants:")
    lines += [f"      {vid}: {ref}" for vid, ref in _variants(refs)]
    return suite, "\n".join(lines) + "\n"


def installed_action() -> str:
    """``owner/fuseci@ref`` of the installed fuseci when pip installed it from a GitHub
    repository (its ``direct_url.json``), else :data:`ACTION_FALLBACK`."""
    try:
        text = metadata.distribution("fuseci").read_text("direct_url.json")
        origin = json.loads(text) if text else {}
    except (metadata.PackageNotFoundError, ValueError):
        return ACTION_FALLBACK
    m = re.fullmatch(r"(?:git\+)?https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?", str(origin.get("url", "")))
    revision = (origin.get("vcs_info") or {}).get("requested_revision")
    if m is None or not revision:
        return ACTION_FALLBACK
    return f"{m.group(1)}@{revision}"


def _workflow_text(options: InitOptions, suite_path: Path, action: str, torch: bool) -> str:
    labels = ", ".join(
        json.dumps(label) if not re.fullmatch(r"[\w.-]+", label) else label for label in options.runner_labels
    )
    extras = "torch" if torch else "cuda12  # CuPy for CUDA 12; cuda13 on a CUDA 13 driver stack"
    pr_if = "github.event_name != 'pull_request' || github.event.pull_request.head.repo.full_name == github.repository"
    return f"""name: fuseci

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
      - uses: {action}
        with:
          suites: {suite_path.as_posix()}
          extras: {extras}
          report-dir: {options.report_dir}
"""


def _label_problem(label: str) -> str:
    """Why a workflow cannot hold ``label`` as a runner label, or ``""``."""
    if not label.strip():
        return "an empty runner label"
    if any(ord(c) < 32 or ord(c) == 127 for c in label):
        return f"runner label {label!r} holds a control character"
    if "," in label:
        return f"runner label {label!r} holds a comma, which separates labels"
    if "${{" in label:
        return f"runner label {label!r} holds ${{{{, which a workflow reads as an expression"
    return ""


def _check_places(options: InitOptions) -> None:
    """The runner labels and the workflow's path, before anything is read or written.

    Raises:
        SuiteError: one line for each label a workflow cannot hold, or a workflow path outside
            ``.github/workflows/``.
    """
    problems = [
        f"--runner-label: {why}; name the label the runner was registered with"
        for why in map(_label_problem, options.runner_labels)
        if why
    ]
    if not options.runner_labels:
        problems.append("--runner-label: none given; name the labels the GPU runner was registered with")
    wf = options.workflow
    if wf.is_absolute() or wf.parent != WORKFLOW.parent or wf.suffix not in (".yml", ".yaml"):
        problems.append(
            f"--workflow {wf.as_posix()}: GitHub runs only the .yml and .yaml files of "
            f"{WORKFLOW.parent.as_posix()}/; name one there, such as {WORKFLOW.as_posix()}"
        )
    if problems:
        raise SuiteError("\n".join(problems))


def plan(options: InitOptions) -> list[tuple[Path, str]]:
    """What :func:`init` writes: each path (relative to the repository) and its text; for
    ``.gitignore``, the lines it must hold.

    Raises:
        SuiteError: fewer than two functions, or one that cannot be found or read; a runner label
            a workflow cannot hold; a workflow path outside ``.github/workflows/``.
    """
    if len(options.functions) < 2:
        raise SuiteError(
            f"fuseci init: {len(options.functions)} function(s) named; name the unfused function, "
            "then one or more fused ones (package.module:function)"
        )
    _check_places(options)
    root = options.root.resolve()
    finder = ModuleFinder([root, *(p for p in sys.path if p)])
    read = [_read(ref, finder) for ref in options.functions]
    torch = _is_torch(options, read)
    suite, text = _suite_text(options, read, torch)
    suite_path = SUITES_DIR / f"{suite}.yaml"
    action = options.action or installed_action()
    return [
        (suite_path, text),
        (options.workflow, _workflow_text(options, suite_path, action, torch)),
        (GITIGNORE, f"{options.report_dir.rstrip('/')}/\n"),
    ]


def _refuse_existing(root: Path, planned: Sequence[tuple[Path, str]]) -> None:
    """Raise when a suite or workflow :func:`init` would write is already there.

    Raises:
        SuiteError: one line per existing file, naming it and the option that writes elsewhere.
    """
    fixes = {
        SUITES_DIR: "remove it, or pass --suite ID for another suite (suites/ID.yaml)",
        WORKFLOW.parent: "remove it, or pass --workflow FILE for another workflow in .github/workflows/",
    }
    there = [
        f"{rel.as_posix()}: exists (fuseci init never replaces a file: nothing written); {fixes[rel.parent]}"
        for rel, _ in planned
        if rel != GITIGNORE and ((root / rel).exists() or (root / rel).is_symlink())
    ]
    if there:
        raise SuiteError("\n".join(there))


def init(options: InitOptions) -> list[Written]:
    """Write what :func:`plan` says, never replacing a file; ``.gitignore`` gets the lines it
    lacks, added at its end.

    Raises:
        SuiteError: as :func:`plan`, or a suite or workflow that exists (each named), before
            anything is written.
        OSError: a file cannot be written.
    """
    planned = plan(options)
    _refuse_existing(options.root, planned)
    for rel, _ in planned:  # a file where a directory goes fails here, before any file is written
        (options.root / rel).parent.mkdir(parents=True, exist_ok=True)
    out: list[Written] = []
    for rel, text in planned:
        path = options.root / rel
        if rel == GITIGNORE:
            out.append(_ignore(path, rel, text.splitlines()))
        else:
            with path.open("x", encoding="utf-8") as f:  # never replaces one made meanwhile
                f.write(text)
            out.append(Written(rel, "written"))
    return out


def _ignore(path: Path, rel: Path, wanted: list[str]) -> Written:
    existed = path.exists()
    held = path.read_text(encoding="utf-8") if existed else ""
    forms = {line.strip().strip("/") for line in held.splitlines()}
    missing = [line for line in wanted if line.strip("/") not in forms]
    if not missing:
        return Written(rel, "exists", f"already ignores {', '.join(wanted)}")
    with path.open("a", encoding="utf-8") as f:
        f.write(("\n" if held and not held.endswith("\n") else "") + "".join(f"{line}\n" for line in missing))
    return Written(rel, "added" if existed else "written", ", ".join(missing))
