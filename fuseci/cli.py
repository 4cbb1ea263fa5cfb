"""The ``fuseci`` command: parse options, call one pipeline function, render, exit.

This module is the single error boundary: a :class:`~fuseci.errors.FuseciError` becomes one
line on stderr and its exit code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from fuseci import __version__, bench, pipeline, runs
from fuseci.atomic import atomic_write_text
from fuseci.compare import Comparison, exit_code, failed
from fuseci.errors import EXIT_REGRESSION, EXIT_SETUP, FuseciError, UsageError
from fuseci.metrics import ENV_FIELDS, SuiteResults
from fuseci.reporters import BENCH_FORMATS, FORMATS
from fuseci.reporters import markdown as markdown_reporter
from fuseci.resultfile import read_results
from fuseci.suite import Suite, load_suite

EXIT_CODES_HELP = (
    "Exit codes: 0 every check passed (or has no baseline yet); 1 a gain regressed or a variant "
    "computed a wrong result; 2 usage error; 3 tool, environment or input error (ncu missing or "
    "refused, bad suite or baseline, baseline from another environment). A regression (1) wins "
    "over an error (3) when both occur."
)

BENCH_EXIT_CODES_HELP = (
    "Exit codes: 0 every variant timed; 1 a variant computed a wrong result; 2 usage error; "
    "3 tool, environment or input error (no GPU or CuPy, the harness crashed or timed out, bad suite). "
    "A wrong result (1) wins over an error (3) when both occur."
)

app = typer.Typer(
    name="fuseci",
    help="Performance CI for GPU kernel fusion: profile fused and unfused kernels under Nsight "
    "Compute, compare the fusion gains with stored baselines, fail the build on regression.",
    epilog=EXIT_CODES_HELP,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
log = logging.getLogger("fuseci")

SuitesArg = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Suite YAML files. Default: every suites/*.yaml under the current directory.", show_default=False
    ),
]
FromReport = Annotated[
    Path | None,
    typer.Option(
        "--from-report",
        help="Re-analyse a recorded .ncu-rep or .ncu-rep.xz (its .harness.json beside it) instead of profiling; needs no GPU.",
        dir_okay=False,
    ),
]
Baselines = Annotated[
    Path, typer.Option("--baselines", help="Baseline root: <root>/<gpu-slug>/<suite>.json.", file_okay=False)
]
ReportDir = Annotated[
    Path,
    typer.Option(
        "--report-dir",
        help="Where profiled runs write <suite>.ncu-rep, .harness.json and logs (overwritten per suite).",
        file_okay=False,
    ),
]
JunitOpt = Annotated[Path | None, typer.Option("--junit", help="Write a JUnit XML report here.", dir_okay=False)]
JsonOpt = Annotated[Path | None, typer.Option("--json", help="Write every number as JSON here.", dir_okay=False)]
MarkdownOpt = Annotated[
    Path | None,
    typer.Option("--markdown", help="Write a Markdown summary here (GitHub's step summary format).", dir_okay=False),
]
ResultsDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--results-dir",
        help="Also keep this run's measurements in a new run file here (<UTC time>-<gpu>[-<commit>].json, never overwritten), for `fuseci compare`.",
        file_okay=False,
    ),
]
NcuOpt = Annotated[str | None, typer.Option("--ncu", help="ncu executable (default: $FUSECI_NCU, then PATH).")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Log what fuseci does to stderr.")]


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="fuseci: %(message)s", stream=sys.stderr
    )


def _load_suites(paths: list[Path] | None) -> list[Suite]:
    if paths:
        return [load_suite(p) for p in paths]
    found = sorted(Path("suites").glob("*.yaml"))
    if not found:
        raise UsageError("no suite given and no suites/*.yaml in the current directory; pass a suite file")
    suites = [load_suite(p) for p in found]
    planted = [s.name for s in suites if s.planted]
    if planted:  # suites of planted regressions run only when named
        log.info("skipping planted-regression suite(s) %s; name the file to run one", ", ".join(planted))
    return [s for s in suites if not s.planted]


def _options(
    baselines: Path,
    report_dir: Path,
    from_report: Path | None,
    ncu: str | None,
    suites: list[Suite],
    accept_env: list[str] | None = None,
) -> pipeline.RunOptions:
    if from_report is not None and len(suites) > 1:  # none: an empty shard
        raise UsageError("--from-report re-analyses one suite's report: pass exactly one suite")
    accepted = _accepted(accept_env)
    return pipeline.RunOptions(
        baselines=baselines, report_dir=report_dir, from_report=from_report, ncu=ncu, accept_env=accepted
    )


def _accepted(accept_env: list[str] | None) -> frozenset[str]:
    """The --accept-env fields (comma-separated or repeated).

    Raises:
        UsageError: a field is not an environment fingerprint field or ``all``.
    """
    accepted = frozenset(f.strip() for item in accept_env or () for f in item.split(",") if f.strip())
    unknown = accepted - set(ENV_FIELDS) - {"all"}
    if unknown:
        raise UsageError(
            f"--accept-env: unknown field(s) {sorted(unknown)}; choose from {', '.join(ENV_FIELDS)} or all"
        )
    return accepted


def _fail(exc: FuseciError) -> typer.Exit:
    typer.echo(f"fuseci: error: {exc}", err=True)
    return typer.Exit(exc.exit_code)


def _save(path: Path, fmt: str, text: str) -> None:
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise FuseciError(f"{path}: cannot write the {fmt} report: {exc}") from None


def _write(path: Path | None, fmt: str, comparisons: list[Comparison]) -> None:
    if path is not None:
        _save(path, fmt, FORMATS[fmt](comparisons))


def _report(comparisons: list[Comparison], junit: Path | None, json_out: Path | None, markdown: Path | None) -> None:
    """The console report, the files asked for, and GitHub's step summary and annotations."""
    typer.echo(FORMATS["console"](comparisons), nl=False)
    _write(junit, "junit", comparisons)
    _write(json_out, "json", comparisons)
    _write(markdown, "markdown", comparisons)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        _append_summary(Path(summary), comparisons)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        typer.echo(FORMATS["github"](comparisons), nl=False)


def _append_summary(path: Path, comparisons: list[Comparison]) -> None:
    """Append to the step summary (GitHub takes up to 1 MiB per step: stay within what is left)."""
    try:
        used = path.stat().st_size if path.exists() else 0
        room = markdown_reporter.STEP_SUMMARY_LIMIT - used
        if room > 0:
            with path.open("a", encoding="utf-8") as fh:
                fh.write(markdown_reporter.render(comparisons, limit=room))
    except OSError as exc:
        log.warning("cannot append to $GITHUB_STEP_SUMMARY (%s): %s", path, exc)


@app.command(epilog=EXIT_CODES_HELP)
def run(
    suites: SuitesArg = None,
    from_report: FromReport = None,
    baselines: Baselines = Path("baselines"),
    report_dir: ReportDir = Path("fuseci-out"),
    junit: JunitOpt = None,
    json_out: JsonOpt = None,
    accept_env: Annotated[
        list[str] | None,
        typer.Option(
            "--accept-env",
            help="Compare although these environment fields differ from the baseline's (comma-separated or repeated; 'all').",
        ),
    ] = None,
    markdown: MarkdownOpt = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="K/N",
            help="Run only shard K of N: whole suites, dealt out deterministically by size (for a CI matrix; merge the --json results with `fuseci merge`).",
        ),
    ] = None,
    results_dir: ResultsDirOpt = None,
    ncu: NcuOpt = None,
    verbose: Verbose = False,
) -> None:
    """Profile suites under ncu (or re-analyse a report), compare with baselines, report.

    With --results-dir it also keeps the run's measurements in a new run file there, for
    `fuseci compare`.

    Under GitHub Actions it also appends a Markdown summary to $GITHUB_STEP_SUMMARY and prints
    error and warning annotations that point at the failing cases in the suite files.
    """
    _setup_logging(verbose)
    try:
        loaded = _load_suites(suites)
        if shard is not None:
            k, n = pipeline.parse_shard(shard)
            loaded = pipeline.shard(loaded, k, n)
            typer.echo(f"fuseci: shard {k}/{n}: {', '.join(s.name for s in loaded) or 'no suites'}", err=True)
        options = _options(baselines, report_dir, from_report, ncu, loaded, accept_env)
        comparisons: list[Comparison] = []
        kept: list[SuiteResults] = []
        for suite in loaded:
            try:
                comparison, results = pipeline.check_results(suite, options)
                comparisons.append(comparison)
                kept.append(results)
            except FuseciError as exc:
                typer.echo(f"fuseci: error: {exc}", err=True)
                comparisons.append(failed(suite, str(exc)))
        _report(comparisons, junit, json_out, markdown)
    except FuseciError as exc:
        raise _fail(exc) from None
    code = exit_code(comparisons)
    if results_dir is not None:
        code = _keep_run(kept, loaded, results_dir, code)
    raise typer.Exit(code)


def _keep_run(kept: list[SuiteResults], suites: list[Suite], directory: Path, code: int) -> int:
    """Save the run file; the exit code, turned to 3 (unless 1) when it cannot be saved."""
    if not kept:
        typer.echo(f"fuseci: no suite was measured; no run file written to {directory}", err=True)
        return code
    try:
        path = runs.save_run(kept, {s.name: s.path for s in suites}, directory)
    except FuseciError as exc:
        typer.echo(f"fuseci: error: {exc}", err=True)
        return code if code == EXIT_REGRESSION else exc.exit_code
    typer.echo(f"fuseci: results saved to {path}", err=True)
    return code


@app.command("compare", epilog=EXIT_CODES_HELP)
def compare_command(
    a: Annotated[
        Path,
        typer.Argument(
            help="Run A, the reference (main's, say): a run file written by `fuseci run --results-dir DIR`, or DIR itself for its newest run file.",
            metavar="A",
            show_default=False,
        ),
    ],
    b: Annotated[
        Path,
        typer.Argument(
            help="Run B, judged against A (the pull request's, say): a run file, or a results directory for its newest run file.",
            metavar="B",
            show_default=False,
        ),
    ],
    suites: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Suite YAML files whose gates, tolerances and expectations judge B. Default: the suite files the runs recorded, relative to the current directory.",
            metavar="SUITES",
            show_default=False,
        ),
    ] = None,
    accept_env: Annotated[
        list[str] | None,
        typer.Option(
            "--accept-env",
            help="Compare although these environment fields differ between A and B (comma-separated or repeated; 'all').",
        ),
    ] = None,
    junit: JunitOpt = None,
    json_out: JsonOpt = None,
    markdown: MarkdownOpt = None,
    verbose: Verbose = False,
) -> None:
    """Judge run B against run A, as `fuseci run` judges a run against its baselines.

    A and B are run files that `fuseci run --results-dir DIR` wrote, or such directories (their
    newest run file). A's measurements stand in for the baselines; the verdicts, reports and
    exit code are those `fuseci run` would give B. A suite in only one of the runs is an error.
    """
    _setup_logging(verbose)
    try:
        accepted = _accepted(accept_env)
        run_a, run_b = runs.load_run(runs.resolve_run(a)), runs.load_run(runs.resolve_run(b))
        typer.echo(f"fuseci: judging B {run_b.path} against A {run_a.path}", err=True)
        loaded = [load_suite(p) for p in suites] if suites else runs.recorded_suites(run_a, run_b)
        if not loaded:
            raise FuseciError(f"no suite to compare: neither {run_a.path} nor {run_b.path} measured one")
        comparisons = runs.compare_runs(run_a, run_b, loaded, accepted)
        _report(comparisons, junit, json_out, markdown)
    except FuseciError as exc:
        raise _fail(exc) from None
    raise typer.Exit(exit_code(comparisons))


@app.command(epilog=EXIT_CODES_HELP)
def merge(
    results: Annotated[
        list[Path], typer.Argument(help="JSON results of `fuseci run --json` (shards, GPU models).", show_default=False)
    ],
    junit: JunitOpt = None,
    json_out: JsonOpt = None,
    markdown: MarkdownOpt = None,
) -> None:
    """Combine the JSON results of several runs into one report, JUnit file and summary.

    The exit code is the one the runs would have had together. A suite that appears in several
    results (one per GPU model) is named with its GPU in the merged reports.
    """
    try:
        comparisons = pipeline.merge([c for path in results for c in read_results(path)])
        _report(comparisons, junit, json_out, markdown)
    except FuseciError as exc:
        raise _fail(exc) from None
    raise typer.Exit(exit_code(comparisons))


@app.command("update-baselines", epilog=EXIT_CODES_HELP)
def update_baselines(
    suites: SuitesArg = None,
    from_report: FromReport = None,
    baselines: Baselines = Path("baselines"),
    report_dir: ReportDir = Path("fuseci-out"),
    force: Annotated[
        bool, typer.Option("--force", help="Re-record every case, even those within tolerance of the old baseline.")
    ] = False,
    ncu: NcuOpt = None,
    verbose: Verbose = False,
) -> None:
    """Re-record baselines after an intended change; prints what changed for review.

    Cases whose every check passes keep their old values, so the diff shows only real changes.
    Wrong or broken cases are never recorded.
    """
    _setup_logging(verbose)
    code = 0
    try:
        loaded = _load_suites(suites)
        options = _options(baselines, report_dir, from_report, ncu, loaded)
        for suite in loaded:
            try:
                update = pipeline.update_baselines(suite, options, force=force)
            except FuseciError as exc:
                typer.echo(f"fuseci: error: {exc}", err=True)
                code = code or exc.exit_code
                continue
            typer.echo(f"{update.path}: {'written' if update.written else 'unchanged'}")
            for line in update.changes:
                typer.echo(f"  {line}")
            for cid in update.kept:
                typer.echo(f"  ! {cid}: not recorded (wrong result or error; old values kept)")
            if update.kept:
                code = (
                    EXIT_REGRESSION
                    if code in (0, EXIT_REGRESSION) and exit_code([update.comparison]) == EXIT_REGRESSION
                    else EXIT_SETUP
                )
    except FuseciError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code)


@app.command("bench", epilog=BENCH_EXIT_CODES_HELP)
def bench_command(
    suites: SuitesArg = None,
    report_dir: Annotated[
        Path,
        typer.Option(
            "--report-dir",
            help="Where timed runs write <suite>.bench.json and <suite>.bench.log (overwritten per suite).",
            file_okay=False,
        ),
    ] = Path("fuseci-out"),
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write every number as JSON here.", dir_okay=False)
    ] = None,
    repeats: Annotated[
        int, typer.Option("--repeats", min=5, help="Timed calls per variant after warm-up; the median is shown.")
    ] = bench.DEFAULT_REPEATS,
    verbose: Verbose = False,
) -> None:
    """Time every variant outside ncu with CUDA events: median time, bandwidth, speedup over unfused.

    Figures only: nothing is compared with a baseline. Needs a GPU and CuPy, not ncu.
    """
    _setup_logging(verbose)
    try:
        loaded = _load_suites(suites)
        options = pipeline.BenchOptions(report_dir=report_dir, repeats=repeats)
        results: list[bench.BenchResult] = []
        for suite in loaded:
            try:
                results.append(pipeline.bench(suite, options))
            except FuseciError as exc:
                typer.echo(f"fuseci: error: {exc}", err=True)
                results.append(bench.failed(suite, str(exc)))
        typer.echo(BENCH_FORMATS["console"](results), nl=False)
        if json_out is not None:
            _save(json_out, "json", BENCH_FORMATS["json"](results))
    except FuseciError as exc:
        raise _fail(exc) from None
    raise typer.Exit(bench.exit_code(results))


@app.command(
    "doctor", epilog="Exit codes: 0 nothing failed (warnings allowed); 3 a check failed. Doctor changes nothing."
)
def doctor(
    ncu: NcuOpt = None,
    json_out: Annotated[
        str | None,
        typer.Option(
            "--json", help="Also write every check as JSON to this file ('-': stdout; the table then goes to stderr)."
        ),
    ] = None,
    verbose: Verbose = False,
) -> None:
    """Check that this machine can run fuseci and say how to fix what cannot.

    In order: fuseci and Python; ncu; the report reader; GPU and driver; GPU clocks; CuPy and
    CUDA (a tiny kernel in a child process); profiling that kernel under ncu (counter access);
    reading its report back. A check whose prerequisite failed is skipped.
    """
    from fuseci.doctor import DoctorOptions, diagnose, render_json, render_table

    _setup_logging(verbose)
    result = diagnose(DoctorOptions(ncu=ncu))
    typer.echo(render_table(result), nl=False, err=json_out == "-")
    try:
        if json_out == "-":
            typer.echo(render_json(result), nl=False)
        elif json_out is not None:
            _save(Path(json_out), "json", render_json(result))
    except FuseciError as exc:
        raise _fail(exc) from None
    raise typer.Exit(result.exit_code)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fuseci {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """fuseci."""


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
