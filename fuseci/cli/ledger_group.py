"""``fuseci ledger``: recorded fusion ledgers read from files, without a GPU (``diff`` and ``show``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fuseci.cli.commands import app
from fuseci.cli.error_boundary import Command, Group
from fuseci.cli.options import Verbose
from fuseci.cli.output import check_outputs, echo, setup_logging, write_file
from fuseci.errors import EXIT_PASS

if TYPE_CHECKING:
    from fuseci.api.ledger_files import FilesDiff, LedgerFile

DIFF_EXIT_CODES_HELP = (
    "Exit codes: 0 no finding regressed (notes allowed); 1 a finding of NEW against OLD regressed "
    "(a split, a new kernel, bytes beyond their band); 2 usage error; 3 a file is missing, unreadable "
    "or not a ledger file, or lacks a key asked for."
)
SHOW_EXIT_CODES_HELP = "Exit codes: 0 shown; 2 usage error; 3 the file is missing, unreadable or not a ledger file, or lacks a key asked for."

ledger_app = typer.Typer(
    name="ledger",
    help="Recorded fusion ledgers, read from files without a GPU: compare two recordings of a model, show one.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=Group,
)
app.add_typer(ledger_app)

FILE_HELP = (
    "a suite's <suite>.ledgers.json (beside its baseline), a results file of `fuseci run --json`, or a single ledger; "
    "any of them compressed as .xz"
)
LedgerKeysOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--key",
        help="Only this ledger, as CASE/VARIANT (repeatable). Default: every ledger of the file(s).",
        metavar="CASE/VARIANT",
        show_default=False,
    ),
]


def _file_line(side: str, f: LedgerFile) -> str:
    from fuseci.reporters.ledger import cut

    about = ", ".join((f.kind.value, *f.about))
    return f"{side} {cut(str(f.path), 400)} ({cut(about)})"


def diff_text(result: FilesDiff) -> str:
    """What ``fuseci ledger diff`` prints: both files, each key's changes and findings, and the outcome."""
    from fuseci.records.fusion import diff_lines
    from fuseci.reporters.ledger import CHANGE_CHARS, cut, totals_brief, verdict_lines
    from fuseci.reporters.text import count

    lines = [_file_line("OLD", result.old), _file_line("NEW", result.new)]
    for d in result.diffs:
        lines += ["", cut(d.key), f"  OLD: {totals_brief(d.old)}", f"  NEW: {totals_brief(d.new)}", "  node by node:"]
        lines += [f"    {cut(line, CHANGE_CHARS)}" for line in diff_lines(d.changes)]
        lines += [f"  {line}" for line in verdict_lines(d.verdict)]
    if result.only_old or result.only_new:
        lines.append("")
    lines += [f"only in OLD: {cut(k)} (not compared)" for k in result.only_old]
    lines += [f"only in NEW: {cut(k)} (not compared)" for k in result.only_new]
    regressed = sum(1 for d in result.diffs if d.verdict.regressions)
    lines += ["", f"{count(len(result.diffs), 'ledger')} compared, {regressed} regressed (exit {result.exit_code})"]
    return "\n".join(lines)


@ledger_app.command("diff", epilog=DIFF_EXIT_CODES_HELP, cls=Command)
def diff_command(
    old: Annotated[Path, typer.Argument(help=f"The ledgers before: {FILE_HELP}.", metavar="OLD", show_default=False)],
    new: Annotated[
        Path, typer.Argument(help="The ledgers after, judged against OLD's: a file of the same kinds.", metavar="NEW")
    ],
    keys: LedgerKeysOpt = None,
    json_out: Annotated[
        Path | None,
        typer.Option(
            "--json", help="Also write the changes and findings as JSON here.", dir_okay=False, metavar="PATH"
        ),
    ] = None,
    verbose: Verbose = False,
) -> int:
    """Compare the same model's ledgers recorded in two places, node by node: what an upgrade did.

    For each CASE/VARIANT both files hold: both sides' totals (DRAM bytes, floor, kernel calls,
    graphs), each node whose company changed ("was fused with ..., now alone", with the bytes and
    time of its kernels on both sides), then the gate's findings as if NEW were judged against
    OLD (REGRESSED, WARN). A key in one file only is said, not compared.

    \b
    Examples:
      fuseci ledger diff torch-2.11/models.ledgers.json torch-2.12/models.ledgers.json
      fuseci ledger diff main-results.json results.json --key prenorm/compiled --json diff.json
    """
    from fuseci.api import ledger_files

    setup_logging(verbose)
    if json_out is not None:
        check_outputs({"json": json_out}, [(old, "OLD"), (new, "NEW")], summary=False)
    result = ledger_files.diff_files(ledger_files.read(old), ledger_files.read(new), keys or ())
    code = result.exit_code
    if json_out is not None:  # before the text, whose last line says the exit code
        code = write_file(json_out, ledger_files.dumps(result), code)
    echo(diff_text(result))
    return code


def show_text(file: LedgerFile, keys: list[str]) -> str:
    """What ``fuseci ledger show`` prints: the file, then each ledger's table, totals and graph breaks."""
    from fuseci.api import ledger_files
    from fuseci.reporters.ledger import cut, ledger_lines

    lines = [_file_line("file", file)]
    for key, ledger in ledger_files.select(file, keys).items():
        lines += ["", cut(key), *(f"  {line}" for line in ledger_lines(ledger))]
        lines += [f"  graph break: {cut(reason, 600)}" for reason in ledger.break_reasons]  # notes: in its lines
    return "\n".join(lines)


@ledger_app.command("show", epilog=SHOW_EXIT_CODES_HELP, cls=Command)
def show_command(
    file: Annotated[Path, typer.Argument(help=f"The ledgers: {FILE_HELP}.", metavar="FILE", show_default=False)],
    keys: LedgerKeysOpt = None,
    verbose: Verbose = False,
) -> int:
    """Print a recorded ledger: its kernel calls, the worst ratio of measured to minimum DRAM
    bytes first, the nodes each runs, and the forward's totals.

    \b
    Examples:
      fuseci ledger show baselines/nvidia-h200/models.ledgers.json --key prenorm/compiled
      fuseci ledger show results.json
    """
    from fuseci.api import ledger_files

    setup_logging(verbose)
    echo(show_text(ledger_files.read(file), keys or []))
    return EXIT_PASS
