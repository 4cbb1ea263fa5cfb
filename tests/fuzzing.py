"""Mutation fuzzing of fuseci's JSON documents, shared by the reader and CLI fuzz tests.

:func:`mutated` takes a real document (a committed baseline, a recorded harness record, a
results or run file) and, drawing every choice from hypothesis, applies one to three mutations:
delete, rename, duplicate or add a member, change a value's type, or put NaN, Infinity, a huge
integer, a lone surrogate, a control character or deep nesting in its place; then, sometimes,
damages the text itself (truncated, a byte flipped, a key written twice). Hypothesis shrinks a
failure to the smallest mutation that shows it.

``FUSECI_FUZZ_SCALE`` multiplies every fuzz test's example count (``FUSECI_FUZZ_SCALE=20 pytest
tests/test_readers_fuzz.py`` for a long local run); CI runs the default counts.

Every fuzz test draws its examples from one seed, ``FUSECI_FUZZ_SEED``; without it, the run
draws one (so that each CI run tries new examples), prints it in pytest's header, and prints it
again beside every fuzz test that fails: ``FUSECI_FUZZ_SEED=N pytest NODE`` replays the failure.
This module is also the pytest plugin that does that (``pytest_plugins`` in conftest.py).
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st

SCALE = float(os.environ.get("FUSECI_FUZZ_SCALE", "1"))
SEED_VARIABLE = "FUSECI_FUZZ_SEED"

T = TypeVar("T", bound=Callable[..., Any])


def fuzz_seed() -> int:
    """The run's seed: ``FUSECI_FUZZ_SEED`` (set by :func:`pytest_configure` when not given)."""
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
            max_examples=max(1, int(examples * SCALE)),
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        )
        seeded: T = seed(fuzz_seed())(chosen(test))
        seeded.fuseci_fuzz = True  # type: ignore[attr-defined]  # its failures name the seed
        return seeded

    return apply


def pytest_configure(config: pytest.Config) -> None:
    """Draw the run's seed unless one is given; set in the environment, so that any worker
    process of the run uses the same."""
    if not os.environ.get(SEED_VARIABLE, "").strip():
        os.environ[SEED_VARIABLE] = str(random.SystemRandom().randrange(2**32))
    fuzz_seed()  # a malformed seed stops the run here, with the fix


def pytest_report_header(config: pytest.Config) -> str:
    return f"fuzz seed: {fuzz_seed()} (replay with {SEED_VARIABLE}={fuzz_seed()})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and getattr(getattr(item, "obj", None), "fuseci_fuzz", False):
        replay = f"{SEED_VARIABLE}={fuzz_seed()} python -m pytest '{item.nodeid}'"
        report.sections.append(("fuzz seed", f"this fuzz test failed with seed {fuzz_seed()}; replay: {replay}"))
    return report


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
    """The bytes of the document ``text`` after one to three mutations (see the module docstring)."""
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
