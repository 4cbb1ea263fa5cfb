"""``fuseci init`` (:mod:`fuseci.api.init`), registered on :data:`fuseci.cli.commands.app`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fuseci.cli.commands import app
from fuseci.cli.error_boundary import Command
from fuseci.cli.options import Verbose
from fuseci.cli.output import echo, error, setup_logging
from fuseci.errors import EXIT_PASS, FuseciError, UsageError

Functions = Annotated[
    list[str],
    typer.Argument(
        help="module:function of the unfused variant, then of each fused one (two or more).",
        metavar="FUNCTION",
        show_default=False,
    ),
]
SuiteId = Annotated[
    str | None, typer.Option("--suite", help="Suite id. Default: the first function's top package.", metavar="ID")
]
CaseIdOpt = Annotated[
    str | None, typer.Option("--case", help="Case id. Default: the fused function's name.", metavar="ID")
]
RunnerLabels = Annotated[
    list[str] | None,
    typer.Option(
        "--runner-label", help="A label of the GPU runner (repeatable). Default: self-hosted, gpu.", metavar="LABEL"
    ),
]
InitReportDir = Annotated[
    str, typer.Option("--report-dir", help="The report directory: ignored by git, kept by the Action.", metavar="DIR")
]
FrameworkOpt = Annotated[
    str | None,
    typer.Option(
        "--framework",
        help="cupy or torch. Default: torch when the functions' modules import torch and not CuPy.",
        metavar="NAME",
    ),
]
ActionRef = Annotated[
    str | None,
    typer.Option(
        "--action",
        help="owner/fuseci@ref of the Action. Default: where the installed fuseci came from (a git install).",
        metavar="REF",
    ),
]
WorkflowFile = Annotated[
    Path | None,
    typer.Option(
        "--workflow",
        help="The workflow file to write, in .github/workflows/. Default: .github/workflows/fuseci.yml.",
        metavar="FILE",
    ),
]
SuiteOnly = Annotated[
    bool,
    typer.Option("--suite-only", help="Write the suite alone, for a repository that has the workflow already."),
]
Root = Annotated[Path, typer.Option("--root", help="The repository to write into.", file_okay=False, metavar="DIR")]


@app.command(
    "init",
    epilog="Exit codes: 0 written; 2 an option a suite, a workflow or a path cannot hold (a runner label, an id, "
    "the Action); 3 a file that exists (nothing is ever replaced) or cannot be written, a function that cannot "
    "be found or read: one line each, nothing written.",
    cls=Command,
)
def init_command(
    functions: Functions,
    suite: SuiteId = None,
    case: CaseIdOpt = None,
    runner_label: RunnerLabels = None,
    report_dir: InitReportDir = "fuseci-out",
    framework: FrameworkOpt = None,
    action: ActionRef = None,
    workflow: WorkflowFile = None,
    suite_only: SuiteOnly = False,
    root: Root = Path("."),
    verbose: Verbose = False,
) -> int:
    """Start fuseci in a repository: a suite of the functions named, a workflow, .gitignore lines.

    Reads each function's parameters from its source without importing it: arrays become the
    case's inputs (placeholder shapes to edit), scalars its params. Writes suites/<suite>.yaml,
    .github/workflows/fuseci.yml (fuseci's GitHub Action on the runner labels given) and the
    report directory's line in .gitignore, and the runner labels in .github/actionlint.yaml when it
    is absent. The Action's extras follow the functions' framework: torch, else cuda12 (CuPy); the
    Action's reference, how fuseci was installed (a git install), else --action. A file that exists
    is never replaced: each is named, and nothing is written. --suite-only adds a suite alone.

    \b
    Examples:
      fuseci init mypkg.ops:add_unfused mypkg.ops:add_fused
      fuseci init mypkg.ops:add_unfused mypkg.ops:add_fused --runner-label self-hosted --runner-label gpu
      fuseci init mypkg.ops:mul_unfused mypkg.ops:mul_fused --suite more --suite-only
    """
    from fuseci.api.init import WORKFLOW, InitOptions, init

    setup_logging(verbose)
    if framework not in (None, "cupy", "torch"):
        raise UsageError(f"--framework {framework}: not cupy or torch")
    options = InitOptions(
        functions=tuple(functions),
        root=root,
        suite=suite,
        case=case,
        runner_labels=tuple(runner_label or ("self-hosted", "gpu")),
        report_dir=report_dir,
        framework=framework,
        action=action,
        workflow=workflow or WORKFLOW,
        suite_only=suite_only,
    )
    try:
        done = init(options)
    except FuseciError as exc:  # one problem a line (each existing file, each bad label), each said alone
        for line in str(exc).splitlines():
            error(line)
        return exc.exit_code
    except OSError as exc:
        raise FuseciError(f"{exc.filename or root}: cannot write: {exc.strerror or exc}") from exc
    for item in done:  # each file written, or found holding what it needs, then what to do next
        detail = f" ({item.detail})" if item.detail else ""
        echo(f"{item.status:<8} {item.path.as_posix()}{detail}")
    echo("fuseci init: edit the placeholder shapes of the suite, then `fuseci check`; commit the files")
    echo("fuseci init: with PyTorch installed (a CPU build will do), `fuseci check --execute` calls each function once")
    return EXIT_PASS
