"""The commands about the machine rather than a suite's verdict: ``fuseci bench`` (figures
outside ncu) and ``fuseci doctor`` (can this machine run fuseci?). Registered on
:data:`fuseci.cli.commands.app` after the others, so they come last in ``fuseci --help``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fuseci.cli.commands import app
from fuseci.cli.error_boundary import Command
from fuseci.cli.options import (
    BENCH_EXIT_CODES_HELP,
    NcuOpt,
    SuitesArg,
    Verbose,
)
from fuseci.cli.output import check_outputs, echo, error, setup_logging
from fuseci.errors import EXIT_REGRESSION, EXIT_SETUP, FuseciError
from fuseci.measure.command import DEFAULT_REPEATS


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
    from fuseci.files.outputs import write_output
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
        try:
            write_output(json_out, BENCH_FORMATS["json"](results))
        except OSError as exc:
            error(f"{json_out}: cannot write the json report: {exc.strerror or exc}")
            code = code if code == EXIT_REGRESSION else EXIT_SETUP
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
    from fuseci.doctor import DoctorOptions, diagnose
    from fuseci.files.outputs import write_output
    from fuseci.reporters.doctor import render_json, render_table

    setup_logging(verbose)
    if json_out not in (None, "-"):  # before the checks, which take a while
        check_outputs({"json": Path(json_out)}, [], summary=False)
    result = diagnose(DoctorOptions(ncu=ncu))
    code = result.exit_code
    if json_out not in (None, "-"):  # before the table, whose last line says the exit code
        try:
            write_output(Path(json_out), render_json(result))
        except OSError as exc:
            error(f"{json_out}: cannot write the json report: {exc.strerror or exc}")
            code = EXIT_SETUP
    echo(render_table(result, code=code), nl=False, err=json_out == "-")
    if json_out == "-":
        echo(render_json(result), nl=False)
    return code
