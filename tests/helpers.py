"""What the test files share: the repository's paths and recorded data, and the helpers more than
one test file uses (files, git, the command line in process, a stand-in measurer, pinned
documents, a reading of HTML, the mutation fuzzer of fuseci's JSON documents).

Test files import from here (``from helpers import ...``); fixtures and pytest's hooks live in
``conftest.py``, the fuzz seed's hooks in ``fuzzing.py``. Everything cached here is cached per
process: per pytest-xdist worker, each of which runs its tests as a session of its own.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st

from fuseci.config.model import Case, Suite, Variant
from fuseci.frames import metrics
from fuseci.ledger import launches
from fuseci.ledger.launches import KernelRow

# --- the repository and its recorded data -----------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
REPORTS = DATA / "reports"
LEGACY = DATA / "legacy"
EXPECTED = DATA / "expected"
SUITES = ROOT / "suites"
ELEMENTWISE = SUITES / "elementwise.yaml"
CLEAN_REPORT = REPORTS / "elementwise.ncu-rep.xz"
REGRESSED_REPORT = REPORTS / "elementwise-regressed.ncu-rep.xz"
H200_BASELINES = ROOT / "baselines"

#: The smallest valid suite, for tests that break one thing at a time.
MINIMAL_SUITE = """\
suite: demo
cases:
  - id: c1
    inputs:
      x: {shape: [1024]}
    variants:
      unfused: kernels.elementwise:scale_relu_add_unfused
      fused: kernels.elementwise:scale_relu_add_fused
"""


def relaxed_elementwise_text() -> str:
    """suites/elementwise.yaml as a user leaves it after accepting the split scale_relu_add of
    the regressed report: its expectations dropped and its bytes allowance off, so that
    ``update-baselines`` may record the split (it refuses to record a broken expectation)."""
    import yaml

    doc = yaml.safe_load(ELEMENTWISE.read_text(encoding="utf-8"))
    for case in doc["cases"]:
        if case["id"] == "scale_relu_add":
            case.pop("expect", None)
            case["bytes_allowance"] = "off"
    return yaml.safe_dump(doc, sort_keys=False)


def case_of(suite: Suite, case_id: str) -> Case:
    """The suite's case with this id."""
    return next(c for c in suite.cases if c.id == case_id)


def variant_of(case: Case, variant_id: str) -> Variant:
    """The case's variant with this id."""
    return next(v for v in case.variants if v.id == variant_id)


# --- files and processes ------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes), to compare a tree before and after."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def committed_baselines(directory: Path) -> Path:
    """A copy of the committed baselines in ``directory/baselines``; its H200 elementwise file."""
    shutil.copytree(H200_BASELINES, directory / "baselines")
    return directory / "baselines" / "nvidia-h200" / "elementwise.json"


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` as a test author; its output, stripped."""
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def within(seconds: float, fn: Any, *args: Any) -> Any:
    """``fn(*args)``, failing the test (instead of hanging it) when it takes longer."""
    out: list[Any] = []

    def call() -> None:
        try:
            out.append(fn(*args))
        except BaseException as exc:  # handed to the test's thread
            out.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{getattr(fn, '__name__', fn)}{args} still running after {seconds} s"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


# --- the command line, in process ---------------------------------------------------------------------


def invoke(*args: object, env: dict[str, str] | None = None, **kwargs: Any) -> Any:
    """``fuseci ARGS`` through typer's test runner (each argument as ``str``); its Result."""
    from typer.testing import CliRunner

    from fuseci.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], env=env, **kwargs)


# --- recorded reports ---------------------------------------------------------------------------------

_FRAMES: dict[str, Any] = {}


@contextmanager
def reports_read_once() -> Iterator[None]:
    """While it lasts, each report file is read by NVIDIA's reader once per process, and each
    read hands out a copy of its frame: for tests that run commands on the recorded reports
    many times over and do not test the reading itself."""
    from fuseci.frames import report

    real = report.read_report

    def read(path: Path, ledger_rows: Any = None, repeats: Any = None, *, ncu: str | None = None) -> Any:
        if ledger_rows or repeats:  # a suite with ledger variants: their kernels are read with the frame
            return real(path, ledger_rows, repeats, ncu=ncu)
        key = os.path.realpath(path)
        if key not in _FRAMES:
            _FRAMES[key] = real(Path(key))
        return _FRAMES[key].copy()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report, "read_report", read)
        yield


def recorded_comparison(report: Path, baselines: Path = Path("baselines")):
    """The elementwise suite re-analysed from a recorded report against the committed baselines
    (or those under ``baselines``; call from the repository root: the ``in_root`` fixture)."""
    from fuseci import api
    from fuseci.config.parse import load_suite

    suite = load_suite("suites/elementwise.yaml")
    # As a user types it from the repository root (README): the advice in messages quotes it.
    relative = report.relative_to(ROOT) if report.is_relative_to(ROOT) else report
    return api.check(suite, api.RunOptions(baselines=baselines, from_report=relative))


@functools.cache
def regressed_comparisons() -> tuple:
    """The recorded regressed elementwise run judged against the committed H200 baselines
    (computed once per process)."""
    from fuseci import api
    from fuseci.config.parse import load_suite

    options = api.RunOptions(baselines=H200_BASELINES, from_report=REGRESSED_REPORT)
    return (api.check(load_suite(ELEMENTWISE), options),)


@functools.cache
def regressed_html() -> str:
    """Its HTML report (rendered once per process)."""
    from fuseci.reporters import html

    return html.render(list(regressed_comparisons()))


# --- pinned documents ---------------------------------------------------------------------------------


def ledger_fragment(ledger: Any, verdict: Any = None, changes: Any = None) -> str:
    """A ledger's HTML fragment as a case's section of a page holds it (the page's styles)."""
    from fuseci.reporters import ledger_html, templating

    return templating.render("ledger.html.j2", ledger=ledger_html.view(ledger, verdict, changes))


def pinned(name: str, text: str) -> None:
    """Compare ``text`` with the whole expected document ``tests/data/expected/NAME``.

    After an intended change, regenerate with ``FUSECI_UPDATE_EXPECTED=1 pytest tests/reporters``
    and review the diff.
    """
    path = EXPECTED / name
    if os.environ.get("FUSECI_UPDATE_EXPECTED"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


# --- measuring without a GPU --------------------------------------------------------------------------

#: The one seam where tests stand in for the GPU: every command that measures (run, ab,
#: update-baselines, api.check) measures through what this function returns.
MEASURER = "fuseci.api.session.measurer"


def measure_with(monkeypatch: pytest.MonkeyPatch, tool):
    """Every suite measured through ``tool`` (a :class:`fuseci.api.session.Measurer`), or through
    what ``tool(ncu)`` makes when it is a function; returns ``tool``."""
    monkeypatch.setattr(MEASURER, tool if callable(tool) else lambda ncu=None: tool)
    return tool


class Given:
    """A :class:`fuseci.api.session.Measurer` that measures every suite as ``results`` and whose
    timed passes add nothing; it notes the cases of each pass (:attr:`retimed`)."""

    def __init__(self, results) -> None:
        self.results = results
        self.retimed: list[list[str]] = []

    def ready(self) -> None:
        pass

    def measure(self, suite, options):
        return self.results

    def retime(self, suite, options, results, cases):
        self.retimed.append(cases)
        return results


# --- HTML, read with the standard library's parser (no browser) -----------------------------------

#: Elements that never have an end tag.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    """An element with its attributes, its parent and its content."""

    tag: str
    attrs: dict[str, str]
    parent: Element | None
    content: list[Element | str] = field(default_factory=list)
    """Child elements and text, in document order."""

    @property
    def children(self) -> list[Element]:
        return [c for c in self.content if isinstance(c, Element)]

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def iter(self) -> Iterator[Element]:
        """This element and every one under it, in document order."""
        stack: list[Element] = [self]
        while stack:
            element = stack.pop()
            yield element
            stack.extend(reversed(element.children))

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.iter()
            if (tag is None or e.tag == tag)
            and (cls is None or cls in e.classes())
            and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def all_text(self) -> str:
        return "".join(c if isinstance(c, str) else c.all_text() for c in self.content)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.content.append(element)
        if "id" in element.attrs:
            self.ids.append(element.attrs["id"])
        if tag not in VOID:
            self.current = element

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.content.append(element)
        if "id" in element.attrs:
            self.ids.append(element.attrs["id"])

    def handle_endtag(self, tag: str) -> None:
        node: Element | None = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data: str) -> None:
        self.current.content.append(data)


def parse(text: str) -> tuple[Element, list[str]]:
    """An HTML document's root and every id, in document order."""
    parser = _Parser()
    parser.feed(text)
    parser.close()
    return parser.root, parser.ids


# --- mutation fuzzing of fuseci's JSON documents --------------------------------------------------
#
# :func:`mutated` takes a real document (a committed baseline, a recorded harness record, a
# results or run file) and, drawing every choice from hypothesis, applies one to three mutations:
# delete, rename, duplicate or add a member, change a value's type, or put NaN, Infinity, a huge
# integer, a lone surrogate, a control character or deep nesting in its place; then, sometimes,
# damages the text itself (truncated, a byte flipped, a key written twice). Hypothesis shrinks a
# failure to the smallest mutation that shows it.
#
# ``FUSECI_FUZZ_SCALE`` multiplies every fuzz test's example count (``FUSECI_FUZZ_SCALE=20 pytest
# tests/test_readers_fuzz.py`` for a long local run); CI runs the default counts. Every fuzz test
# draws its examples from one seed, ``FUSECI_FUZZ_SEED`` (the plugin ``fuzzing.py`` draws one for
# a run that gives none, prints it, and names it beside every fuzz test that fails).

FUZZ_SCALE = float(os.environ.get("FUSECI_FUZZ_SCALE", "1"))
SEED_VARIABLE = "FUSECI_FUZZ_SEED"

T = TypeVar("T", bound=Callable[..., Any])


def fuzz_seed() -> int:
    """The run's seed: ``FUSECI_FUZZ_SEED`` (set by the ``fuzzing`` plugin when not given)."""
    text = os.environ.get(SEED_VARIABLE, "").strip()
    try:
        return int(text)
    except ValueError:
        raise pytest.UsageError(f"{SEED_VARIABLE}={text!r}: give a whole number, the seed a run printed") from None


def fuzz_settings(examples: int) -> Callable[[T], T]:
    """The settings of one fuzz test: ``examples`` (times ``FUSECI_FUZZ_SCALE``), from the run's
    seed, no deadline, no example database (a CI runner keeps none), the health checks big
    documents trip disabled. Decorates the test (above ``@given``)."""

    def apply(test: T) -> T:
        chosen = settings(
            max_examples=max(1, int(examples * FUZZ_SCALE)),
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        )
        seeded: T = seed(fuzz_seed())(chosen(test))
        seeded.fuseci_fuzz = True  # type: ignore[attr-defined]  # its failures name the seed
        return seeded

    return apply


def deep(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


#: Values that have broken parsers: every JSON type, at and beyond every limit fuseci sets.
NASTY = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        -1,
        1,
        2**31,
        2**53 + 1,
        2**63 - 1,
        2**63,
        2**64,
        -(2**63),
        10**39,
        10**40,
        10**41,
        -(10**40),
        0.5,
        -0.0,
        1e308,
        -1e308,
        5e-324,
        1e-300,
        math.nan,
        math.inf,
        -math.inf,
        "",
        " ",
        "\n",
        "x\n::add-mask::secret",
        "\x1b[2J\x07\x00",
        "\u2028::stop-commands::t",
        "\udc80",
        "\ud800x",
        "a" * 70_000,
        "elementwise\n",
        "-x",
        "--help",
        "../../../../etc/passwd",
        "/dev/zero",
        "wrong-ish",
        "ok",
        "wrong",
        "error",
        "pass",
        "regressed",
        "(suite)",
        "elementwise@nvidia-h200",
        "NVIDIA H100 80GB HBM3",
        "NaN",
        "Infinity",
        "1e999",
        [],
        {},
        [[]],
        {"": None},
        [1, "a", None],
    ]
)
JUNK = st.one_of(
    NASTY.map(copy.deepcopy),  # a fresh copy: mutations must not change the table for later examples
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.one_of(st.integers(-3, 3), st.text(max_size=3), st.none()), max_size=4),
    st.dictionaries(st.text(max_size=6), st.one_of(st.integers(-3, 3), st.none(), st.text(max_size=3)), max_size=3),
    st.integers(30, 300).map(deep),
)
OPS = ("replace", "replace", "delete", "rename", "add", "duplicate", "nan", "number", "string", "swap")


def _walk(data: st.DataObject, doc: Any) -> tuple[Any, Any]:
    """A (container, key or index) somewhere in ``doc``, reached by a random walk from the root."""
    parent: Any = None
    key: Any = None
    node = doc
    for _ in range(data.draw(st.integers(0, 9), label="depth")):
        if isinstance(node, dict) and node:
            k = data.draw(st.sampled_from(sorted(node, key=str)), label="key")
        elif isinstance(node, list) and node:
            k = data.draw(st.integers(0, len(node) - 1), label="index")
        else:
            break
        parent, key, node = node, k, node[k]
    return parent, key


def _mutate_once(data: st.DataObject, doc: Any) -> Any:
    parent, key = _walk(data, doc)
    op = data.draw(st.sampled_from(OPS), label="op")
    if parent is None:  # the document itself
        return data.draw(JUNK, label="document") if op in ("replace", "swap") else doc
    value = parent[key]
    if op == "delete":
        del parent[key]
    elif op == "rename" and isinstance(parent, dict):
        parent[data.draw(st.one_of(NASTY.filter(lambda v: isinstance(v, str)), st.text(max_size=8)))] = parent.pop(key)
    elif op == "add":
        target = value if isinstance(value, (dict, list)) else parent
        if isinstance(target, dict):
            target[data.draw(st.text(max_size=10), label="new key")] = data.draw(JUNK, label="new value")
        else:
            target.append(data.draw(JUNK, label="new item"))
    elif op == "duplicate":
        if isinstance(parent, list):
            parent.insert(key, json.loads(json.dumps(value, allow_nan=True)))
        elif isinstance(value, (dict, list)) and value:
            first = next(iter(value)) if isinstance(value, dict) else 0
            if isinstance(value, dict):
                value[f"{first}"] = value[first]
            else:
                value.append(value[0])
    elif op == "nan":
        parent[key] = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    elif op == "number":
        parent[key] = data.draw(st.one_of(st.integers(-(10**45), 10**45), st.floats(allow_nan=True)))
    elif op == "string":
        text = value if isinstance(value, str) else str(value)[:20]
        cut = data.draw(st.integers(0, len(text)))
        parent[key] = (
            text[:cut] + data.draw(st.sampled_from(["\n", "\udc80", "\x1b", "\u2028", "\x00", "..", "/"])) + text[cut:]
        )
    elif op == "swap" and isinstance(value, (int, float)) and not isinstance(value, bool):
        parent[key] = str(value)
    else:
        parent[key] = data.draw(JUNK, label="value")
    return doc


def _damage(data: st.DataObject, raw: bytes) -> bytes:
    how = data.draw(st.sampled_from(["none"] * 6 + ["truncate", "flip", "dup-key", "bom", "trailing"]), label="text")
    if not raw or how == "none":
        return raw
    at = data.draw(st.integers(0, len(raw) - 1), label="at")
    if how == "truncate":
        return raw[:at]
    if how == "flip":
        return raw[:at] + bytes([raw[at] ^ data.draw(st.integers(1, 255))]) + raw[at + 1 :]
    if how == "bom":
        return b"\xef\xbb\xbf" + raw
    if how == "trailing":
        return raw + data.draw(st.sampled_from([b"x", b"{}", b"\x00", b"\n\n", b" ]"]))
    brace = raw.find(b"{", at)
    if brace < 0:
        return raw
    key = data.draw(st.sampled_from([b"suite", b"cases", b"format_version", b"status", b"format", b"env"]))
    return (
        raw[: brace + 1]
        + b'"'
        + key
        + b'": '
        + json.dumps(data.draw(JUNK), allow_nan=True).encode()
        + b", "
        + raw[brace + 1 :]
    )


def mutated(data: st.DataObject, text: str) -> bytes:
    """The bytes of the document ``text`` after one to three mutations (see above)."""
    doc: Any = json.loads(text)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        doc = _mutate_once(data, doc)
    ascii_only = data.draw(st.booleans(), label="ensure_ascii")
    try:
        raw = json.dumps(doc, allow_nan=True, ensure_ascii=ascii_only).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate written raw: the bytes a broken writer would leave
        raw = json.dumps(doc, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    except RecursionError:
        raw = b"[" * 100_000
    return _damage(data, raw)


# --- a real browser, for the HTML report's tests -------------------------------------------------

#: Launch flags for a browser with no network to reach and nothing to set up.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: A laptop's first screen.
VIEWPORT = {"width": 1280, "height": 800}


def chromium() -> str:
    """The Chromium executable: $FUSECI_CHROMIUM, /usr/bin/chromium, or one on PATH."""
    candidates = [os.environ.get("FUSECI_CHROMIUM", ""), "/usr/bin/chromium"]
    candidates += [shutil.which(n) or "" for n in ("chromium", "chromium-browser", "google-chrome")]
    found = next((c for c in candidates if c and Path(c).is_file()), None)
    reason = None
    if found is None:
        reason = "Chromium is not installed (apt-get install chromium, or set FUSECI_CHROMIUM)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "Playwright is not installed (pip install -e '.[test]')"
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser test cannot run in CI: {reason}")
        pytest.skip(reason)
    assert found is not None
    return found


def in_range(rows: Sequence[KernelRow], name: str) -> tuple[KernelRow, ...]:
    """The rows inside the NVTX range ``name`` (the forward's own: ``case.compiled``)."""
    return tuple(r for r in rows if any(launches._range(n)[0] == name for n in r.nvtx))


def dram_peak(kernels: pd.DataFrame) -> float | None:
    """The card's peak DRAM bandwidth in bytes/s that ncu's percentage of peak implies."""
    return metrics._peak(metrics._numbers(kernels, metrics._PEAK_SOURCES))
