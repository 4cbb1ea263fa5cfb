"""Property-based tests and a bounded fuzz run of the suite loader.

Whatever the file holds, ``load_suite`` returns a Suite or raises a one-line SuiteError that
names the file; nothing else. Documents are built (a) from strategies around the suite
structure, (b) by mutating the shipped suites, (c) from random bytes and YAML-ish text. A
suite the loader takes must also satisfy the JSON Schema (the schema is never stricter).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SUITES, fuzz_settings
from hypothesis import assume, event, given
from hypothesis import strategies as st

from fuseci.config import quantities
from fuseci.config.dtypes import DTYPE_NAMES, FRAMEWORKS, dtype
from fuseci.config.model import DISTRIBUTIONS, Suite
from fuseci.config.parse import SCHEMA_FILE, load_suite
from fuseci.errors import SuiteError

jsonschema = pytest.importorskip("jsonschema")

FUZZ = fuzz_settings(200)
VALIDATOR = jsonschema.Draft7Validator(jsonschema.validators.json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
SHIPPED = {p.name: p.read_bytes() for p in sorted(SUITES.glob("*.yaml"))}
# libyaml's emitter and parser where PyYAML has them: the pure-Python ones would take most of
# the run's time.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SHIPPED_DOCS = {name: yaml.load(text, Loader=_LOADER) for name, text in SHIPPED.items()}


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # One file rewritten per example: hypothesis runs many examples per test call, so a
    # function-scoped tmp_path would be shared anyway.
    yield tmp_path_factory.mktemp("fuzz") / "suite.yaml"


def outcome(path: Path, data: bytes) -> Suite | SuiteError:
    """Load ``data`` from ``path``: a Suite, or a well-formed SuiteError. Anything else fails."""
    path.write_bytes(data)
    try:
        return load_suite(path)
    except SuiteError as exc:
        message = str(exc)
        assert message.startswith(str(path)), message
        assert "\n" not in message and "\r" not in message, message
        assert len(message) < 1000, message
        return exc


def schema_takes(data: object) -> bool:
    return VALIDATOR.is_valid(data)


def dump(doc: object) -> bytes:
    return yaml.dump(doc, Dumper=_DUMPER, allow_unicode=True, sort_keys=False, width=200).encode("utf-8")


# --- (a) documents built around the suite structure -------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**70), max_value=10**70),
    st.floats(),
    st.text(max_size=12),
)
junk = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
ids = st.one_of(st.from_regex(r"\A[A-Za-z0-9_-]{1,10}\Z"), st.text(max_size=10))
identifiers = st.one_of(st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,6}\Z"), st.text(max_size=6))
refs = st.one_of(
    st.from_regex(r"\A[a-z_][a-z0-9_]{0,5}(\.[a-z_][a-z0-9_]{0,5}){0,2}:[a-z_][a-z0-9_]{0,6}\Z"), st.text(max_size=14)
)
quantity_names = st.one_of(st.sampled_from(quantities.gateable()), st.text(max_size=12))
tolerances = st.one_of(st.sampled_from(["exact", "off", "3%", "±2.5%", "+-10%", "0%", "99%", "100%", "abc"]), junk)
expectations = st.one_of(st.sampled_from([">= 2x", "== 3", "< 1.1x", "> 0.5", "2x", ">= 1e999"]), junk)
gates = st.one_of(st.dictionaries(quantity_names, tolerances, max_size=3), junk)
expects = st.one_of(st.dictionaries(quantity_names, expectations, max_size=3), junk)
numbers = st.one_of(st.integers(-10, 10), st.floats(), junk)


def mostly(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually ``strategy``, sometimes a value of any type."""
    return st.one_of(strategy, strategy, strategy, junk)


def some_keys(
    required: dict[str, st.SearchStrategy[Any]], optional: dict[str, st.SearchStrategy[Any]]
) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping with the required keys (sometimes one missing), optional ones, and sometimes a stray."""
    full = st.fixed_dictionaries(required, optional={**optional, "stray": junk})
    partial = st.fixed_dictionaries({}, optional={**required, **optional})
    return st.one_of(full, full, full, partial)


shapes = st.one_of(st.lists(st.integers(-1, 2**20), max_size=4), st.integers(-1, 2**40))
input_specs = some_keys(
    {"shape": mostly(shapes)},
    {
        "dtype": st.one_of(st.sampled_from(DTYPE_NAMES), st.text(max_size=8)),
        "distribution": st.one_of(st.sampled_from(DISTRIBUTIONS), st.text(max_size=8)),
        "seed": st.one_of(st.integers(-3, 2**70), junk),
        "low": numbers,
        "high": numbers,
        "mean": numbers,
        "std": numbers,
    },
)
correctness = st.one_of(st.fixed_dictionaries({}, optional={"rtol": numbers, "atol": numbers, "eps": numbers}), junk)
variant_specs = st.one_of(refs, some_keys({"fn": refs}, {"expect": expects}), junk)
variants = st.dictionaries(st.one_of(st.sampled_from(["unfused", "fused", "fused_v2"]), ids), variant_specs, max_size=4)
cases = some_keys(
    {
        "id": mostly(ids),
        "inputs": mostly(st.dictionaries(identifiers, mostly(input_specs), max_size=3)),
        "variants": mostly(variants),
    },
    {
        "description": st.one_of(st.text(max_size=20), junk),
        "params": st.one_of(st.dictionaries(identifiers, scalars, max_size=3), junk),
        "reference": st.one_of(refs, st.none()),
        "correctness": correctness,
        "gates": gates,
        "expect": expects,
    },
)
suites = some_keys(
    {"suite": mostly(ids), "cases": mostly(st.lists(mostly(cases), max_size=3))},
    {
        "description": st.one_of(st.text(max_size=20), junk),
        "defaults": st.one_of(
            some_keys(
                {},
                {
                    "dtype": st.one_of(st.sampled_from(DTYPE_NAMES), st.text(max_size=8)),
                    "distribution": st.one_of(st.sampled_from(DISTRIBUTIONS), st.text(max_size=8)),
                    "seed": st.one_of(st.integers(-3, 100), junk),
                    "correctness": correctness,
                    "gates": gates,
                    "expect": expects,
                },
            ),
            junk,
        ),
        "ncu": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "clock_control": st.one_of(st.sampled_from(["none", "base", "bsae"]), junk),
                    "cache_control": st.one_of(st.sampled_from(["all", "none"]), junk),
                    "replay_mode": st.one_of(st.sampled_from(["kernel", "application"]), junk),
                    "timeout": numbers,
                },
            ),
            junk,
        ),
    },
)


@FUZZ
@given(doc=suites)
def test_any_suite_shaped_document_loads_or_fails_cleanly(target: Path, doc: dict[str, Any]) -> None:
    result = outcome(target, dump(doc))
    event("loaded" if isinstance(result, Suite) else "refused")
    if isinstance(result, Suite):
        assert schema_takes(yaml.load(target.read_text(encoding="utf-8"), Loader=_LOADER))


# A strategy for suites that are valid by construction: the loader must take every one.
valid_inputs = st.dictionaries(
    st.from_regex(r"\A[a-z_][a-z0-9_]{0,6}\Z"),
    st.fixed_dictionaries(
        {"shape": st.lists(st.integers(1, 64), min_size=1, max_size=4)},
        optional={"dtype": st.sampled_from(DTYPE_NAMES), "seed": st.integers(0, 2**63), "mean": st.floats(-1e6, 1e6)},
    ),
    min_size=1,
    max_size=3,
)
valid_cases = st.fixed_dictionaries(
    {
        "id": st.from_regex(r"\A[A-Za-z0-9_-]{1,10}\Z"),
        "inputs": valid_inputs,
        "variants": st.fixed_dictionaries(
            {"unfused": st.just("m.ops:f"), "fused": st.one_of(st.just("m.fused:f"), st.just({"fn": "m:g"}))}
        ),
    },
    optional={
        "description": st.text(max_size=20),
        "gates": st.dictionaries(
            st.sampled_from(quantities.gateable()), st.sampled_from(["exact", "off", "2%", "±5%"])
        ),
        "expect": st.dictionaries(st.sampled_from(quantities.gains()), st.sampled_from([">= 1x", "== 2", "< 3.5x"])),
        "correctness": st.fixed_dictionaries({}, optional={"rtol": st.floats(0, 1), "atol": st.floats(0, 1)}),
        "framework": st.sampled_from(FRAMEWORKS),
    },
)


@fuzz_settings(100)
@given(
    name=st.from_regex(r"\A[A-Za-z0-9_-]{1,10}\Z"),
    cases=st.lists(valid_cases, min_size=1, max_size=3, unique_by=lambda c: c["id"]),
)
def test_every_valid_suite_loads_and_satisfies_the_schema(target: Path, name: str, cases: list[dict[str, Any]]) -> None:
    doc = {"suite": name, "cases": cases}
    for case in cases:
        assume(not set(case.get("params", {})) & set(case["inputs"]))
        if any("cupy" not in dtype(i.get("dtype", "float32")).frameworks for i in case["inputs"].values()):
            case["framework"] = "torch"  # bfloat16 and float8 need a framework that has them
    result = outcome(target, dump(doc))
    assert isinstance(result, Suite), result
    assert [c.id for c in result.cases] == [c["id"] for c in cases]
    assert schema_takes(doc)


# --- (b) mutations of the shipped suites -----------------------------------------------------


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


@FUZZ
@given(name=st.sampled_from(sorted(SHIPPED)), data=st.data())
def test_a_shipped_suite_with_a_field_deleted_duplicated_or_retyped(
    target: Path, name: str, data: st.DataObject
) -> None:
    doc = copy.deepcopy(SHIPPED_DOCS[name])
    path = data.draw(st.sampled_from([p for p in _paths(doc) if p]), label="path")
    parent, last = _parent(doc, path), path[-1]
    action = data.draw(st.sampled_from(["delete", "duplicate", "retype"]), label="action")
    if action == "delete":
        del parent[last]
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(last, parent[last])
    elif action == "duplicate":
        parent[f"{last}_copy"] = parent[last]
    else:
        parent[last] = data.draw(junk, label="value")
    result = outcome(target, dump(doc))
    event("loaded" if isinstance(result, Suite) else "refused")
    if isinstance(result, Suite):
        assert schema_takes(doc)


@FUZZ
@given(name=st.sampled_from(sorted(SHIPPED)), data=st.data())
def test_a_shipped_suite_with_bytes_inserted_truncated_or_a_line_repeated(
    target: Path, name: str, data: st.DataObject
) -> None:
    text = SHIPPED[name]
    action = data.draw(st.sampled_from(["insert", "truncate", "repeat-line", "overwrite"]), label="action")
    at = data.draw(st.integers(0, len(text)), label="at")
    if action == "insert":
        text = text[:at] + data.draw(st.binary(min_size=1, max_size=8), label="bytes") + text[at:]
    elif action == "truncate":
        text = text[:at]
    elif action == "overwrite":
        text = text[:at] + data.draw(st.binary(min_size=1, max_size=4), label="bytes") + text[at + 4 :]
    else:
        lines = text.splitlines(keepends=True)
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        text = b"".join(lines[: i + 1] + lines[i:])
    outcome(target, text)


# --- (c) random bytes and YAML-ish text -------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=600))
def test_random_bytes(target: Path, data: bytes) -> None:
    outcome(target, data)


# YAML's indicators and a few characters it treats specially (NUL, a BOM, non-ASCII).
YAMLISH = [*"{}[]:,-&*!|>?'\"#%@` \n\t\\.<=~ax01_", "\u00e9", "\x00", "\ufeff"]
yamlish = st.text(alphabet=st.sampled_from(YAMLISH), max_size=120)


@FUZZ
@given(text=yamlish)
def test_yaml_ish_text(target: Path, text: str) -> None:
    outcome(target, text.encode("utf-8"))


@FUZZ
@given(
    prefix=st.sampled_from(
        [
            "suite: s\ncases:\n- id: c\n  inputs: {x: {shape: [1]}}\n  variants: {unfused: a:b, fused: a:b}\n  ",
            "suite: ",
        ]
    ),
    text=yamlish,
)
def test_yaml_ish_text_inside_a_suite(target: Path, prefix: str, text: str) -> None:
    outcome(target, (prefix + text).encode("utf-8"))
