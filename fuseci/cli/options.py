"""The options and arguments of the commands, declared once each as an ``Annotated`` type, and the
exit codes their help states."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fuseci.reporters import FILE_FORMATS

EXIT_CODES_HELP = (
    "Exit codes: 0 every check passed (or has no baseline yet); 1 a gain regressed or a variant "
    "computed a wrong result; 2 usage error; 3 tool, environment or input error (ncu missing or "
    "refused, bad suite or baseline, baseline from another environment; a report that could not "
    "be written). A regression (1) wins over an error (3) when both occur; 143 or 129: SIGTERM or "
    "SIGHUP ended it, what it had started stopped."
)

BENCH_EXIT_CODES_HELP = (
    "Exit codes: 0 every variant timed; 1 a variant computed a wrong result; 2 usage error; "
    "3 tool, environment or input error (no GPU or CuPy, the harness crashed or timed out, bad suite). "
    "A wrong result (1) wins over an error (3) when both occur."
)

HISTORY_EXIT_CODES_HELP = (
    "Exit codes: 0 the history was read (whatever changed: it reports, it gates nothing); "
    "2 usage error; 3 the directory is missing, holds no run file, or a run file is unreadable."
)

SuitesArg = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Suite YAML files. Default: every suites/*.yaml under the current directory.",
        show_default=False,
        metavar="SUITE",
    ),
]
FromReport = Annotated[
    Path | None,
    typer.Option(
        "--from-report",
        help="Re-analyse a recorded .ncu-rep or .ncu-rep.xz (its .harness.json beside it) instead of profiling; needs no GPU.",
        dir_okay=False,
        metavar="REPORT",
    ),
]
Baselines = Annotated[
    Path,
    typer.Option("--baselines", help="Baseline root: <root>/<gpu-slug>/<suite>.json.", file_okay=False, metavar="DIR"),
]
ReportDir = Annotated[
    Path,
    typer.Option(
        "--report-dir",
        help="Where profiled runs write <suite>.ncu-rep, .harness.json and logs (overwritten per suite).",
        file_okay=False,
        metavar="DIR",
    ),
]
ResultsDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--results-dir",
        help="Also keep this run's measurements in a new run file here (<UTC time>-<gpu>[-<commit>].json, never overwritten), for `fuseci compare`.",
        file_okay=False,
        metavar="DIR",
    ),
]
CommitOpt = Annotated[
    str | None,
    typer.Option(
        "--commit",
        help="The commit this run measured, in its run file (default: $GITHUB_SHA, else git rev-parse HEAD; none for --from-report, whose recording does not say).",
        metavar="SHA",
    ),
]
TimeOpt = Annotated[
    str | None,
    typer.Option(
        "--time",
        help="With --from-report: the UTC time its run file is stamped with (default: when ncu recorded the report).",
        metavar="YYYY-mm-ddTHH:MM:SSZ",
    ),
]
AcceptEnv = Annotated[
    list[str] | None,
    typer.Option(
        "--accept-env",
        help="Compare although these environment fields differ from the baseline's (comma-separated or repeated; 'all').",
        metavar="FIELDS",
    ),
]
NcuOpt = Annotated[
    str | None, typer.Option("--ncu", help="ncu executable (default: $FUSECI_NCU, then PATH).", metavar="PATH")
]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Log what fuseci does to stderr.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress while it runs: only the report at the end.")]

# fuseci run's own.
RunShard = Annotated[
    str | None,
    typer.Option(
        "--shard",
        metavar="K/N",
        help="Run only shard K of N: whole suites, dealt out deterministically by size (for a CI matrix; merge the --json results with `fuseci merge`).",
    ),
]
Gpus = Annotated[
    str,
    typer.Option(
        "--gpus",
        metavar="SPEC",
        help="GPUs to deal the suites out over: all (every visible GPU), a number N (the first N), or a list like 0,1. Each suite is judged against its card model's baselines; one report.",
    ),
]
RunInFlight = Annotated[
    int,
    typer.Option(
        "--in-flight",
        min=1,
        max=8,
        metavar="N",
        help="Suites in flight at once per GPU: while one measures, the next starts up and the last is judged (they take turns on the GPU).",
    ),
]

# fuseci ab's own.
AbBase = Annotated[
    str,
    typer.Argument(
        help="The base: a git ref (branch, tag, commit) whose suite files and kernel modules are checked out into a temporary worktree.",
        metavar="BASE",
        show_default=False,
    ),
]
AbHead = Annotated[
    str | None,
    typer.Argument(
        help="The head, judged against BASE: a git ref. Default: the working tree as it is, uncommitted changes included.",
        metavar="HEAD",
        show_default=False,
    ),
]
AbSuites = Annotated[
    list[Path] | None,
    typer.Option(
        "--suite",
        "-s",
        help="A suite file, relative to the current directory (repeatable). Default: every suites/*.yaml of either side.",
        metavar="FILE",
        show_default=False,
    ),
]
AbEvery = Annotated[
    bool,
    typer.Option(
        "--all",
        help="Measure every suite, also those whose suite file, kernel modules and fuseci version are the same on both sides.",
    ),
]
AbIgnore = Annotated[
    list[str] | None,
    typer.Option(
        "--ignore",
        metavar="PATTERN",
        help="Paths no case reads (from the repository's root; * matches any characters, / included: 'docs/*', "
        "'*.md'; repeatable): a change of the commits there does not have every case measured.",
    ),
]
AbShard = Annotated[
    str | None,
    typer.Option(
        "--shard",
        metavar="K/N",
        help="Compare only shard K of N: whole suites, dealt out as `fuseci run --shard` deals them.",
    ),
]
AbInFlight = Annotated[
    int,
    typer.Option(
        "--in-flight",
        min=1,
        max=8,
        metavar="N",
        help="Measurements in flight at once: while one side uses the GPU, the next starts up (they take turns on the GPU).",
    ),
]


def _report_file(name: str) -> Any:
    """The ``--FORMAT PATH`` option of a report format, as :data:`fuseci.reporters.FILE_FORMATS` has it."""
    (f,) = (f for f in FILE_FORMATS if f.name == name)
    return typer.Option(f.option, help=f.help, dir_okay=False, metavar="PATH")


# The report files of run, ab, check, compare and merge, one per registry format (tests/test_cli_output.py checks).
JunitFile = Annotated[Path | None, _report_file("junit")]
JsonFile = Annotated[Path | None, _report_file("json")]
MarkdownFile = Annotated[Path | None, _report_file("markdown")]
HtmlFile = Annotated[Path | None, _report_file("html")]


def report_files(**paths: Path | None) -> dict[str, Path]:
    """The report files asked for, by format name (``report_files(junit=..., json=...)``)."""
    return {name: path for name, path in paths.items() if path is not None}
