"""The commands: each parses its options, calls :mod:`fuseci.api`, renders, and returns its exit
code. Heavy modules are imported inside the commands, so that ``fuseci --help`` is fast."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fuseci import __version__
from fuseci.cli.error_boundary import Command, Group
from fuseci.cli.measuring import Keep, keeper, measure_and_report, say_pairs, suite_inputs, suite_problems
from fuseci.cli.options import (
    BENCH_EXIT_CODES_HELP,
    EXIT_CODES_HELP,
    HISTORY_EXIT_CODES_HELP,
    AbBase,
    AbEvery,
    AbHead,
    AbIgnore,
    AbInFlight,
    AbShard,
    AbSuites,
    AcceptEnv,
    Baselines,
    CommitOpt,
    FromReport,
    Gpus,
    HtmlFile,
    JsonFile,
    JunitFile,
    MarkdownFile,
    NcuOpt,
    Quiet,
    ReportDir,
    ResultsDirOpt,
    RunInFlight,
    RunShard,
    SuitesArg,
    TimeOpt,
    Verbose,
    report_files,
)
from fuseci.cli.output import Terminal, check_outputs, echo, error, kept_files, report, say, setup_logging, write_file
from fuseci.errors import EXIT_PASS, EXIT_REGRESSION, EXIT_SETUP, Cancelled, FuseciError, UsageError
from fuseci.measure import caches
from fuseci.measure.command import DEFAULT_REPEATS

if TYPE_CHECKING:
    from fuseci.config.model import Suite

app = typer.Typer(
    name="fuseci",
    help="Performance CI for GPU kernel fusion: profile fused and unfused kernels under Nsight "
    "Compute, compare the fusion gains with stored baselines, fail the build on regression.",
    epilog=EXIT_CODES_HELP,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=Group,
)


@app.command(epilog=EXIT_CODES_HELP, cls=Command)
def run(
    ctx: typer.Context,
    suites: SuitesArg = None,
    from_report: FromReport = None,
    baselines: Baselines = Path("baselines"),
    report_dir: ReportDir = Path("fuseci-out"),
    accept_env: AcceptEnv = None,
    shard: RunShard = None,
    results_dir: ResultsDirOpt = None,
    commit: CommitOpt = None,
    time: TimeOpt = None,
    gpus: Gpus = "all",
    in_flight: RunInFlight = 2,
    ncu: NcuOpt = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
    junit_file: JunitFile = None,
    json_file: JsonFile = None,
    markdown_file: MarkdownFile = None,
    html_file: HtmlFile = None,
) -> int:
    """Profile suites under ncu (or re-analyse a report), compare with baselines, report.

    With --results-dir it also keeps the run's measurements in a new run file there, for
    `fuseci compare`.

    Under GitHub Actions it also appends a Markdown summary to $GITHUB_STEP_SUMMARY and prints
    error and warning annotations that point at the failing cases in the suite files.

    \b
    Examples:
      fuseci run                                   # every suites/*.yaml
      fuseci run suites/elementwise.yaml --junit out/junit.xml --html out/report.html
      fuseci run --gpus 0,1 --results-dir runs/   # two GPUs; keep the run for compare/history
      fuseci run suites/elementwise.yaml --from-report fuseci-out/elementwise.ncu-rep  # no GPU
      fuseci run suites/elementwise.yaml --from-report r.ncu-rep --results-dir runs/ --commit 1a2b3c4 --time 2026-11-20T09:00:00Z
    """
    caches.keep(report_dir)  # before the heavy imports below
    from fuseci import api
    from fuseci.measure import devices

    outputs = report_files(junit=junit_file, json=json_file, markdown=markdown_file, html=html_file)
    terminal = ctx.ensure_object(Terminal)
    setup_logging(verbose)
    if from_report is not None and len(suites or ()) != 1:
        raise UsageError("--from-report re-analyses one suite's report: pass exactly one suite")
    stamp = None
    if commit is not None or time is not None:
        if results_dir is None:
            raise UsageError("--commit and --time stamp the run file: pass --results-dir DIR too")
        from fuseci.store import runs

        stamp = runs.given_stamp(commit, time, from_report)
    check = api.check_suites(suites, resolve=from_report is None)
    read = suite_inputs(check)
    if check.problems:  # nothing is measured: every problem is reported, where it is
        check_outputs(outputs, read)
        return suite_problems(terminal, check, outputs)
    loaded = api.runnable(check, bool(suites))
    if shard is not None:
        k, n = api.parse_shard(shard)
        loaded = api.shard(loaded, k, n)
        say(f"fuseci: shard {k}/{n}: {', '.join(s.name for s in loaded) or 'no suites'}", err=True)
    options = api.RunOptions(
        baselines=baselines,
        report_dir=report_dir,
        from_report=from_report,
        ncu=ncu,
        accept_env=api.parse_accept_env(accept_env),
        gpus=(None,) if from_report is not None else devices.select(gpus),
        in_flight=in_flight,
    )
    kept = kept_files(baselines=[baselines], results_dirs=[results_dir])
    check_outputs(outputs, [*read, *api.own_files(loaded, options), *kept])
    keep: Keep[api.RunOutcome] = keeper(results_dir, lambda outcome, to: api.keep_run(outcome, loaded, to, stamp))
    session = partial(api.run, loaded, options)
    return measure_and_report(terminal, outputs, session, keep, quiet=quiet, verbose=verbose)


@app.command("ab", epilog=EXIT_CODES_HELP, cls=Command)
def ab_command(
    ctx: typer.Context,
    base: AbBase,
    head: AbHead = None,
    suite: AbSuites = None,
    every: AbEvery = False,
    ignore: AbIgnore = None,
    report_dir: ReportDir = Path("fuseci-out"),
    accept_env: AcceptEnv = None,
    shard: AbShard = None,
    results_dir: ResultsDirOpt = None,
    in_flight: AbInFlight = 2,
    ncu: NcuOpt = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
    junit_file: JunitFile = None,
    json_file: JsonFile = None,
    markdown_file: MarkdownFile = None,
    html_file: HtmlFile = None,
) -> int:
    """Judge HEAD against BASE, both measured now on this GPU: the pull-request gate.

    The base's suite files and kernel modules come from a temporary git worktree of BASE
    (removed afterwards). Per suite the base is measured, then the head, in one job on one GPU,
    each in its own processes and tree; the head's gains are judged against the base's with the
    gates, tolerances, re-measurement and verdicts of `fuseci run`, and the same reports. No
    stored baseline is read or written.

    A suite whose suite file, kernel modules (the modules its variants and references name and
    those they import from the repository) and fuseci version are the same on both sides is not
    measured: the report says "unchanged, not measured" (--all measures it). A suite file on one
    side only is added (judged without a reference) or removed (said, not measured).

    \b
    Examples:
      fuseci ab origin/main                        # the working tree against main
      fuseci ab "$BASE_SHA" --junit out/junit.xml --markdown out/summary.md
      fuseci ab HEAD HEAD --all                    # A/A: the false-alarm test, must pass
      fuseci ab main HEAD --suite suites/elementwise.yaml
    """
    caches.keep(report_dir)  # before the heavy imports below
    from fuseci import api
    from fuseci.api import ab

    outputs = report_files(junit=junit_file, json=json_file, markdown=markdown_file, html=html_file)
    terminal = ctx.ensure_object(Terminal)
    setup_logging(verbose)
    options = ab.AbOptions(
        report_dir=report_dir, ncu=ncu, accept_env=api.parse_accept_env(accept_env), every=every, in_flight=in_flight
    )
    parts = api.parse_shard(shard) if shard is not None else None
    cwd = Path.cwd()
    try:
        with ab.trees(base, head, cwd) as (repo, base_side, head_side):
            pairs, problems = ab.pair_suites(suite, base_side, head_side, cwd=cwd, repo=repo, ignore=ignore or ())
            read = [(repo / p.rel, f"the suite file of {p.name!r}") for p in pairs if p.head is not None]
            if problems:
                for message in problems:
                    error(message)
                check_outputs(outputs, read)
                return EXIT_SETUP
            if parts is not None:
                pairs = ab.shard_pairs(pairs, *parts)
                say(f"fuseci: shard {parts[0]}/{parts[1]}: {', '.join(p.name for p in pairs) or 'no suites'}", err=True)
            kept = kept_files(root=repo, results_dirs=[results_dir])
            check_outputs(outputs, [*read, *ab.own_files(pairs, options), *kept])
            say_pairs(pairs, base_side, head_side, every)
            keep: Keep[ab.AbOutcome] = keeper(
                results_dir, lambda outcome, to: ab.keep_head_run(outcome, pairs, head_side, to), "the head's results"
            )
            session = partial(ab.run_ab, pairs, base_side, head_side, options)
            return measure_and_report(terminal, outputs, session, keep, quiet=quiet, verbose=verbose)
    except Cancelled as exc:
        error(f"cancelled ({exc.name}): the measurements in flight were stopped and the temporary worktrees removed")
        return exc.exit_code


@app.command(
    "check",
    epilog="Exit codes: 0 every suite file is valid (with --execute: and every call ran and matched, or could not "
    "run here); 1 (--execute) a variant or reference computed a wrong result or raised; 2 usage error; 3 a suite "
    "file has a problem, or its functions could not be called at all.",
    cls=Command,
)
def check_command(
    ctx: typer.Context,
    suites: SuitesArg = None,
    execute: Annotated[
        bool,
        typer.Option(
            "--execute",
            help="Also call every variant and reference once, on this machine's CPU (PyTorch, a CPU build will do; "
            "Triton kernels in Triton's interpreter), on small inputs of the suite's dtypes, and compare each "
            "with the float64 reference. No GPU, no ncu.",
        ),
    ] = False,
    junit_file: JunitFile = None,
    json_file: JsonFile = None,
    markdown_file: MarkdownFile = None,
    html_file: HtmlFile = None,
) -> int:
    """Check suite files on any machine, without a GPU: the format and every value, one suite id
    per file, and that every module:function exists (read from its source, never imported or
    run).

    Every problem of every file is listed, each at the line of the offending key; each file
    without problems gets one line (ok, or which references exist but could not be read and so
    are not verified), and a summary ends the output. The report files (--junit and the others)
    are written either way: problems as failed test cases, and under GitHub Actions annotations
    on the suite files. `fuseci run` makes the same checks before it measures anything.

    \b
    With --execute, each suite without problems is then called, in a process of its own under a
    time limit: each input's long axes divided by one power of two (rank, dtypes and the ratios
    between axes kept), each function called once, and one line per call says whether it ran
    and matched the reference, computed a wrong result, raised (what, at which file:line), or
    could not run here (CuPy needs a GPU, code that needs CUDA).

    \b
    Examples:
      fuseci check                     # every suites/*.yaml
      fuseci check suites/mine.yaml --junit check.xml
      fuseci check --execute           # and call every function once, on the CPU
    """
    from fuseci import api
    from fuseci.api.suites import check_report

    outputs = report_files(junit=junit_file, json=json_file, markdown=markdown_file, html=html_file)
    terminal = ctx.ensure_object(Terminal)
    check = api.check_suites(suites)
    check_outputs(outputs, suite_inputs(check))
    for f in check.files:
        for p in f.reported:
            error(p.message)
        for w in f.warnings:
            say(f"fuseci: warning: {w.message}", err=True)
        if not f.problem_count:
            say(f.summary())
    code = report(terminal, check_report(check), outputs, EXIT_PASS if check.ok else EXIT_SETUP, console=False)
    say(check.summary())
    if execute and check.ok:
        code = max(code, _execute(check.suites))
    elif execute:
        say("fuseci check: --execute calls nothing until the problems above are fixed")
    return code


def _execute(suites: Sequence[Suite]) -> int:
    """``check --execute``: each suite's functions called once; one line per call, one per suite."""
    from fuseci.api.execute import execute, exit_code
    from fuseci.records.trials import Outcome

    done = []
    for suite in suites:
        executed = execute(suite)
        for t in executed.trials:
            (error if t.outcome in (Outcome.WRONG, Outcome.RAISED) else say)(executed.line(t))
        (error if executed.problem else say)(executed.summary())
        done.append(executed)
    return exit_code(done)


@app.command("compare", epilog=EXIT_CODES_HELP, cls=Command)
def compare_command(
    ctx: typer.Context,
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
            metavar="SUITE",
            show_default=False,
        ),
    ] = None,
    accept_env: AcceptEnv = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Only the report: no line saying which run files are judged.")
    ] = False,
    verbose: Verbose = False,
    junit_file: JunitFile = None,
    json_file: JsonFile = None,
    markdown_file: MarkdownFile = None,
    html_file: HtmlFile = None,
) -> int:
    """Judge run B against run A, as `fuseci run` judges a run against its baselines.

    A and B are run files that `fuseci run --results-dir DIR` wrote, or such directories (their
    newest run file). A's measurements stand in for the baselines; the verdicts, reports and
    exit code are those `fuseci run` would give B. A suite in only one of the runs is an error.

    \b
    Examples:
      fuseci compare runs/20261101T120000Z-nvidia-h200.json runs/
      fuseci compare main-runs/ branch-runs/ suites/elementwise.yaml --markdown diff.md
    """
    from fuseci import api
    from fuseci.config.parse import load_suite
    from fuseci.judge.verdict import exit_code
    from fuseci.store import runs

    outputs = report_files(junit=junit_file, json=json_file, markdown=markdown_file, html=html_file)
    terminal = ctx.ensure_object(Terminal)
    setup_logging(verbose)
    accepted = api.parse_accept_env(accept_env)
    run_a, run_b = runs.load_run(runs.resolve_run(a)), runs.load_run(runs.resolve_run(b))
    if not quiet:
        say(f"fuseci: judging B {run_b.path} against A {run_a.path}", err=True)
    loaded = [load_suite(p) for p in suites] if suites else api.recorded_suites(run_a, run_b)
    if not loaded:
        raise FuseciError(f"no suite to compare: neither {run_a.path} nor {run_b.path} measured one")
    suite_files = [(s.path, f"the suite file of {s.name!r}") for s in loaded]
    kept = [(p, "a run file of the results directory") for given in (a, b) for p in runs.kept_in(given)]
    check_outputs(outputs, [(run_a.path, "run A"), (run_b.path, "run B"), *suite_files, *kept])
    comparisons = api.compare_runs(run_a, run_b, loaded, accepted)
    return report(terminal, comparisons, outputs, exit_code(comparisons), verbose=verbose)


@app.command(epilog=EXIT_CODES_HELP, cls=Command)
def merge(
    ctx: typer.Context,
    results: Annotated[
        list[Path],
        typer.Argument(
            help="JSON results of `fuseci run --json` (shards, GPU models).", show_default=False, metavar="RESULTS"
        ),
    ],
    junit_file: JunitFile = None,
    json_file: JsonFile = None,
    markdown_file: MarkdownFile = None,
    html_file: HtmlFile = None,
) -> int:
    """Combine the JSON results of several runs into one report, JUnit file and summary.

    The exit code is the one the runs would have had together. A suite that appears in several
    results (one per GPU model) is named with its GPU in the merged reports; two results of one
    suite on one card (or one file named twice) are refused.

    \b
    Examples:
      fuseci merge shard-*/results.json --junit junit.xml --html report.html
    """
    from fuseci import api
    from fuseci.judge.verdict import exit_code

    outputs = report_files(junit=junit_file, json=json_file, markdown=markdown_file, html=html_file)
    terminal = ctx.ensure_object(Terminal)
    check_outputs(outputs, [(path, "a results file being merged") for path in results])
    comparisons = api.merge_results(results)
    return report(terminal, comparisons, outputs, exit_code(comparisons))


@app.command("history", epilog=HISTORY_EXIT_CODES_HELP, cls=Command)
def history_command(
    results_dir: Annotated[
        Path,
        typer.Argument(
            help="A results directory: the run files `fuseci run --results-dir DIR` wrote there.",
            metavar="RESULTS_DIR",
            show_default=False,
        ),
    ],
    suites: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Suite YAML files whose gates give each gain's tolerance. Default: none (every gain ungated); the suite paths run files record are never opened.",
            metavar="SUITE",
            show_default=False,
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write a self-contained HTML page with a trend chart per gain here.",
            dir_okay=False,
            metavar="PATH",
        ),
    ] = None,
    suite: Annotated[
        list[str] | None,
        typer.Option("--suite", help="Only this suite id (repeatable). Default: every suite of the runs.", metavar="S"),
    ] = None,
    last: Annotated[
        int | None, typer.Option("--last", min=1, help="Only the newest N runs.", metavar="N", show_default=False)
    ] = None,
    verbose: Verbose = False,
) -> int:
    """Follow every fusion gain across the runs in RESULTS_DIR and say where each changed level.

    Prints one line per change point (which gain stepped from what to what, at which commit),
    found by a change-point search scaled by each gate's tolerance, from the SUITE files given
    (without them every gain is ungated). Works on runs re-analysed with --from-report, so
    anywhere. It reports; it gates nothing.

    \b
    Examples:
      fuseci history runs/ suites/*.yaml
      fuseci history runs/ suites/elementwise.yaml --suite elementwise --last 30 --html history.html
    """
    from fuseci import api
    from fuseci.config.parse import load_suite
    from fuseci.reporters import history as history_reporter
    from fuseci.store import runs

    setup_logging(verbose)
    gates = [load_suite(p) for p in suites or ()]
    if html is not None:
        kept = [(p, "a run file of the results directory") for p in runs.kept_in(results_dir)]
        check_outputs(
            {"html": html}, [*kept, *((s.path, f"the suite file of {s.name!r}") for s in gates)], summary=False
        )
    found = api.history(results_dir, suite or (), last, gates)
    echo(history_reporter.render_text(found, str(results_dir)), nl=False)
    if html is not None:
        return write_file(html, history_reporter.render_html(found, str(results_dir)), EXIT_PASS, "html page")
    return EXIT_PASS


@app.command("update-baselines", epilog=EXIT_CODES_HELP, cls=Command)
def update_baselines(
    suites: SuitesArg = None,
    from_report: FromReport = None,
    baselines: Baselines = Path("baselines"),
    report_dir: ReportDir = Path("fuseci-out"),
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Re-record every measured case: also those within tolerance of the old baseline, and those that miss an expectation or their bytes allowance.",
        ),
    ] = False,
    ncu: NcuOpt = None,
    verbose: Verbose = False,
) -> int:
    """Re-record baselines after an intended change; prints what changed for review.

    Cases whose every check passes keep their old values, so the diff shows only real changes.
    A case that misses an expectation, its bytes allowance or correctness is refused (exit 1):
    the next run would fail on it; --force records it anyway and says what it overrode. Wrong
    or broken cases are never recorded; a baseline with no case is never written.

    \b
    Examples:
      fuseci update-baselines suites/elementwise.yaml   # then review: git diff baselines/
      fuseci update-baselines                           # every suites/*.yaml
      fuseci update-baselines suites/elementwise.yaml --force
    """
    caches.keep(report_dir)  # before the heavy imports below
    from fuseci import api
    from fuseci.judge.verdict import update_exit_code

    setup_logging(verbose)
    loaded = api.load_suites(suites)
    if from_report is not None and len(loaded) > 1:
        raise UsageError("--from-report re-analyses one suite's report: pass exactly one suite")
    options = api.RunOptions(baselines=baselines, report_dir=report_dir, from_report=from_report, ncu=ncu)
    codes: list[int] = []
    for suite in loaded:
        try:
            update = api.update_baselines(suite, options, force=force)
        except FuseciError as exc:
            error(str(exc))
            codes.append(exc.exit_code)
            continue
        state = "written" if update.written else "not written: nothing to record" if update.empty else "unchanged"
        say(f"{update.path}: {state}")
        for line in update.changes:
            say(f"  {line}")
        for cid in update.kept:
            say(f"  ! {cid}: not recorded (wrong result or error; old values kept)")
        for r in update.refused:
            say(
                f"  ! {r.case}: not recorded: {r.describe()} (the next run would fail on it; fix the kernel or the "
                "suite, or record it anyway with --force)"
            )
        for r in update.overridden:
            say(f"  ! {r.case}: recorded with --force although {r.describe()}")
        codes.append(update_exit_code(update.comparison, update.kept, bool(update.refused)))
    return max(codes, key=lambda c: (c == EXIT_REGRESSION, c), default=EXIT_PASS)


def _version(value: bool) -> None:
    if value:
        echo(f"fuseci {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """fuseci."""
    ctx.obj = Terminal()  # what this invocation prints to; its commands find it with ensure_object


@app.command("bench", epilog=BENCH_EXIT_CODES_HELP, cls=Command)
def bench_command(
    suites: SuitesArg = None,
    report_dir: Annotated[
        Path,
        typer.Option(
            "--report-dir",
            help="Where timed runs write <suite>.bench.json and <suite>.bench.log (overwritten per suite).",
            file_okay=False,
            metavar="DIR",
        ),
    ] = Path("fuseci-out"),
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write every number as JSON here.", dir_okay=False, metavar="PATH")
    ] = None,
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats", min=5, metavar="N", help="Timed calls per variant after warm-up; the median is shown."
        ),
    ] = DEFAULT_REPEATS,
    verbose: Verbose = False,
) -> int:
    """Time every variant outside ncu with CUDA events: median time, bandwidth, speedup over unfused.

    Figures only: nothing is compared with a baseline. Needs a GPU and CuPy, not ncu.

    \b
    Examples:
      fuseci bench suites/elementwise.yaml
      fuseci bench --repeats 200 --json bench.json
    """
    from fuseci import api
    from fuseci.measure import bench
    from fuseci.reporters import BENCH_FORMATS

    setup_logging(verbose)
    loaded = api.load_suites(suites)
    options = api.BenchOptions(report_dir=report_dir, repeats=repeats)
    check_outputs({"json": json_out} if json_out else {}, api.bench_own_files(loaded, options), summary=False)
    results: list[bench.BenchResult] = []
    for suite in loaded:
        try:
            results.append(api.bench(suite, options))
        except FuseciError as exc:
            error(str(exc))
            results.append(bench.failed(suite, str(exc)))
    code = bench.exit_code(results)
    if json_out is not None:  # before the table, whose last line says the exit code
        code = write_file(json_out, BENCH_FORMATS["json"](results), code)
    echo(BENCH_FORMATS["console"](results, code=code), nl=False)
    return code


@app.command(
    "doctor",
    epilog="Exit codes: 0 nothing failed (warnings allowed); 3 a check failed. Doctor changes nothing.",
    cls=Command,
)
def doctor(
    ncu: NcuOpt = None,
    json_out: Annotated[
        str | None,
        typer.Option(
            "--json",
            help="Also write every check as JSON to this file ('-': stdout; the table then goes to stderr).",
            metavar="PATH",
        ),
    ] = None,
    verbose: Verbose = False,
) -> int:
    """Check that this machine can run fuseci and say how to fix what cannot.

    In order: fuseci and Python; ncu; the report reader; GPU and driver; GPU clocks; CuPy and
    CUDA (a tiny kernel in a child process); profiling that kernel under ncu (counter access);
    reading its report back. A check whose prerequisite failed is skipped.

    \b
    Examples:
      fuseci doctor
      fuseci doctor --json doctor.json
    """
    from fuseci.doctor import diagnose
    from fuseci.doctor.diagnosis import DoctorOptions
    from fuseci.reporters.doctor import render_json, render_table

    setup_logging(verbose)
    if json_out not in (None, "-"):  # before the checks, which take a while
        check_outputs({"json": Path(json_out)}, [], summary=False)
    result = diagnose(DoctorOptions(ncu=ncu))
    code = result.exit_code
    if json_out not in (None, "-"):  # before the table, whose last line says the exit code
        code = write_file(json_out, render_json(result), code)
    echo(render_table(result, code=code), nl=False, err=json_out == "-")
    if json_out == "-":
        echo(render_json(result), nl=False)
    return code
