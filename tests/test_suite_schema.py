"""fuseci/suite.schema.json: valid, shipped with the package, and in step with the loader."""

from __future__ import annotations

import importlib.resources
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import MINIMAL_SUITE, ROOT, SUITES, invoke, variant_of, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

jsonschema = pytest.importorskip("jsonschema")

from fuseci import validation  # noqa: E402
from fuseci.config import quantities  # noqa: E402
from fuseci.config.dtypes import DTYPE_NAMES  # noqa: E402
from fuseci.config.model import CACHE_CONTROLS, CHECK_NAMES, CLOCK_CONTROLS, DISTRIBUTIONS, REPLAY_MODES  # noqa: E402
from fuseci.config.parse import SCHEMA_FILE, load_suite  # noqa: E402
from fuseci.config.policy import parse_expectation, parse_tolerance  # noqa: E402
from fuseci.config.values import MAX_DIMS  # noqa: E402
from fuseci.errors import SuiteError  # noqa: E402

SCHEMA: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)
DEFS = SCHEMA["definitions"]
PROPERTY = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

GOOD = MINIMAL_SUITE
X = "{shape: [1024]}"
_FUSED = "fused: kernels.elementwise:scale_relu_add_fused"


def _schema_errors(data: object) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(data)]


def test_the_schema_is_a_valid_draft_7_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)


def test_the_schema_ships_with_the_package() -> None:
    resource = importlib.resources.files("fuseci").joinpath("suite.schema.json")
    assert json.loads(resource.read_text(encoding="utf-8")) == SCHEMA
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "suite.schema.json" in pyproject["tool"]["setuptools"]["package-data"]["fuseci"]


def test_the_committed_schema_is_the_one_the_models_generate() -> None:
    """``python -m fuseci.config.schema`` rewrites it after the models change."""
    from fuseci.config import schema

    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema.text(schema.generate())


def _map(field: dict[str, Any]) -> dict[str, Any]:
    """A map field's schema, whether or not it may be null."""
    return next(f for f in field.get("anyOf", [field]) if f.get("type") == "object")


def _enum(field: dict[str, Any]) -> list[str]:
    return next(f for f in field.get("anyOf", [field]) if "enum" in f)["enum"]


def test_the_schema_names_what_the_loader_takes() -> None:
    case, long, inputs = DEFS["Case"]["properties"], DEFS["LongVariant"]["properties"], DEFS["Input"]["properties"]
    for id_field in (
        SCHEMA["properties"]["suite"],
        case["id"],
        long["baseline"],
        _map(case["variants"])["propertyNames"],
    ):
        assert (id_field["pattern"], id_field["maxLength"]) == (validation.ID_PATTERN.pattern, validation.MAX_ID_CHARS)
    assert _enum(inputs["dtype"]) == _enum(DEFS["Defaults"]["properties"]["dtype"]) == list(DTYPE_NAMES)
    assert _enum(inputs["distribution"]) == list(DISTRIBUTIONS)
    for gates in (case["gates"], DEFS["Defaults"]["properties"]["gates"]):
        assert _map(gates)["propertyNames"]["enum"] == list(quantities.gateable())
    for expect in (case["expect"], long["expect"]):
        assert _map(expect)["propertyNames"]["enum"] == list(quantities.gains())
    assert long["caught_by"]["anyOf"][0]["enum"] == [*CHECK_NAMES, *quantities.gateable()]
    ncu = DEFS["Ncu"]["properties"]
    assert ncu["clock_control"]["enum"] == list(CLOCK_CONTROLS)
    assert ncu["cache_control"]["enum"] == list(CACHE_CONTROLS)
    assert ncu["replay_mode"]["enum"] == list(REPLAY_MODES)
    assert inputs["shape"]["anyOf"][1]["maxItems"] == MAX_DIMS


def test_the_schema_and_the_loader_take_the_same_ledgers(tmp_path: Path) -> None:
    """``ledger:`` is true, false or a mapping of ``allow_new`` (patterns, or one) and ``graphs``
    (a positive integer): the schema's keys are the model's, and what it takes the loader takes."""
    from fuseci.config.document import LedgerDoc

    ledger = DEFS["Ledger"]
    assert set(ledger["properties"]) == set(LedgerDoc.model_fields) and ledger["additionalProperties"] is False
    assert ledger["properties"]["graphs"]["minimum"] == 1
    long = DEFS["LongVariant"]["properties"]["ledger"]["anyOf"]
    assert long == [{"type": "boolean"}, {"$ref": "#/definitions/Ledger"}]
    for spec in ("true", "false", "{}", "{allow_new: ['triton_.*', x], graphs: 1}", "{allow_new: 'x.*'}"):
        text = "defaults: {framework: torch}\n" + GOOD.replace(_FUSED, f"fused: {{fn: a:b, ledger: {spec}}}")
        assert _schema_errors(yaml.safe_load(text)) == [], spec
        assert variant_of(load_suite(write(tmp_path / "s.yaml", text)).cases[0], "fused").fn == "a:b"


SHIPPED = sorted(SUITES.glob("*.yaml")) + sorted((ROOT / "tests" / "data" / "suites").glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_suite_validates(path: Path) -> None:
    assert _schema_errors(yaml.safe_load(path.read_text(encoding="utf-8"))) == []


#: The documented suite examples: the first ```yaml block after each heading.
DOC_EXAMPLES = [
    ("docs/SUITES.md", "## Writing a suite"),
    ("docs/SUITES.md", "## Whole models: the fusion ledger"),
    ("README.md", "## Your first suite"),
]


@pytest.mark.parametrize(("doc", "heading"), DOC_EXAMPLES, ids=[f"{d}:{h}" for d, h in DOC_EXAMPLES])
def test_the_documented_examples_validate_and_load(tmp_path: Path, doc: str, heading: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert heading in text, f"{doc} has no {heading!r} section"
    section = text.split(heading, 1)[1]
    example = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert example, f"{doc}'s {heading!r} has no yaml example"
    assert _schema_errors(yaml.safe_load(example.group(1))) == []
    assert load_suite(write(tmp_path / "example.yaml", example.group(1))).cases


BROKEN = {
    "no suite": GOOD.replace("suite: demo\n", ""),
    "no cases": "suite: demo\n",
    "empty cases": "suite: demo\ncases: []\n",
    "cases as mapping": "suite: demo\ncases: {id: c1}\n",
    "top level list": "- " + GOOD.replace("\n", "\n  "),
    "unknown top key": GOOD + "owner: me\n",
    "bad suite id": GOOD.replace("suite: demo", "suite: my/suite"),
    "description list": GOOD + "description: [a]\n",
    "no case id": GOOD.replace("  - id: c1\n    inputs:", "  - inputs:"),
    "bad case id": GOOD.replace("id: c1", "id: 'c:1'"),
    "case id too long": GOOD.replace("id: c1", f"id: {'c' * (validation.MAX_ID_CHARS + 1)}"),
    "suite id too long": GOOD.replace("suite: demo", f"suite: {'s' * 1000}"),
    "unknown case key": GOOD + "    timeout: 3\n",
    "no inputs": GOOD.replace("    inputs:\n      x: {shape: [1024]}\n", ""),
    "empty inputs": GOOD.replace("    inputs:\n      x: {shape: [1024]}\n", "    inputs: {}\n"),
    "input not identifier": GOOD.replace("x: {shape", "2x: {shape"),
    "no shape": GOOD.replace(X, "{dtype: float32}"),
    "empty shape": GOOD.replace("[1024]", "[]"),
    "zero dim": GOOD.replace("[1024]", "[0]"),
    "float dim": GOOD.replace("[1024]", "[1.5]"),
    "too many dims": GOOD.replace("[1024]", "[" + ", ".join(["1"] * 33) + "]"),
    "unknown input key": GOOD.replace(X, "{shape: [1024], sed: 1}"),
    "bad dtype": GOOD.replace(X, "{shape: [1024], dtype: float128}"),
    "bad distribution": GOOD.replace(X, "{shape: [1024], distribution: poisson}"),
    "negative seed": GOOD.replace(X, "{shape: [1024], seed: -1}"),
    "string seed": GOOD.replace(X, "{shape: [1024], seed: '1'}"),
    "string mean": GOOD.replace(X, "{shape: [1024], mean: zero}"),
    "params list": GOOD + "    params: [1]\n",
    "param not scalar": GOOD + "    params: {alpha: [1]}\n",
    "param not identifier": GOOD + "    params: {a-b: 1}\n",
    "bad reference": GOOD + "    reference: numpy.add\n",
    "reference two colons": GOOD + "    reference: a:b:c\n",
    "no variants": GOOD.split("    variants:")[0],
    "no unfused": GOOD.replace("unfused:", "baseline:"),
    "only unfused": GOOD.replace("      fused: kernels.elementwise:scale_relu_add_fused\n", ""),
    "bad variant id": GOOD.replace("      fused:", "      fused/v2:"),
    "variant number": GOOD.replace("fused: kernels.elementwise:scale_relu_add_fused", "fused: 3"),
    "long variant without fn": GOOD.replace("fused: kernels.elementwise:scale_relu_add_fused", "fused: {expect: {}}"),
    "long variant extra key": GOOD.replace(
        "fused: kernels.elementwise:scale_relu_add_fused", "fused: {fn: a:b, gates: {}}"
    ),
    "unfused with expectation": GOOD.replace(
        "unfused: kernels.elementwise:scale_relu_add_unfused", "unfused: {fn: a:b, expect: {launches: '>= 1x'}}"
    ),
    "ledger string": GOOD.replace(_FUSED, "fused: {fn: a:b, framework: torch, ledger: 'yes'}"),
    "ledger null": GOOD.replace(_FUSED, "fused: {fn: a:b, framework: torch, ledger: null}"),
    "ledger graphs 0": GOOD.replace(_FUSED, "fused: {fn: a:b, framework: torch, ledger: {graphs: 0}}"),
    "ledger graphs string": GOOD.replace(_FUSED, "fused: {fn: a:b, framework: torch, ledger: {graphs: x}}"),
    "ledger unknown key": GOOD.replace(_FUSED, "fused: {fn: a:b, framework: torch, ledger: {alow_new: [x]}}"),
    "ledger empty pattern": GOOD.replace(_FUSED, "fused: {fn: a:b, framework: torch, ledger: {allow_new: ['']}}"),
    "ledger pattern number": GOOD.replace(_FUSED, "fused: {fn: a:b, framework: torch, ledger: {allow_new: [3]}}"),
    "caught_by unknown": GOOD.replace(_FUSED, "fused: {fn: a:b, caught_by: [ledgr]}"),
    "negative rtol": GOOD + "    correctness: {rtol: -1}\n",
    "unknown correctness key": GOOD + "    correctness: {eps: 1}\n",
    "ungateable": GOOD + "    gates: {dram_bytes: 3%}\n",
    "bad tolerance": GOOD + "    gates: {launches: five percent}\n",
    "tolerance 100%": GOOD + "    gates: {launches: 100%}\n",
    "negative tolerance": GOOD + "    gates: {launches: -5%}\n",
    "bare off": GOOD + "    gates: {launches: off}\n",
    "bare number expectation": GOOD + "    expect: {launches: 3}\n",
    "expectation without operator": GOOD + "    expect: {launches: 2x}\n",
    "expectation of nothing": GOOD + "    expect: {time: '>= 1x'}\n",
    "unknown defaults key": GOOD + "defaults: {rtol: 1}\n",
    "bad default dtype": GOOD + "defaults: {dtype: f32}\n",
    "defaults list": GOOD + "defaults: []\n",
    "unknown ncu key": GOOD + "ncu: {metrics: all}\n",
    "bad clock control": GOOD + "ncu: {clock_control: locked}\n",
    "zero timeout": GOOD + "ncu: {timeout: 0}\n",
    "string timeout": GOOD + "ncu: {timeout: soon}\n",
}


@pytest.mark.parametrize("text", BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_suite_is_rejected_by_the_schema_and_the_loader(tmp_path: Path, text: str) -> None:
    assert _schema_errors(yaml.safe_load(text)), "the schema takes it"
    with pytest.raises(SuiteError):
        load_suite(write(tmp_path / "s.yaml", text))


# --- the string patterns against the parsers ------------------------------------------------------

_TOL_PATTERN = re.compile(_map(DEFS["Case"]["properties"]["gates"])["additionalProperties"]["pattern"])
_EXPECT_PATTERN = re.compile(_map(DEFS["Case"]["properties"]["expect"])["additionalProperties"]["pattern"])
_WS = st.sampled_from(["", " ", "  ", "\t", "\u00a0"])

tolerance_like = st.one_of(
    st.text(max_size=12),
    st.builds(
        "".join,
        st.tuples(
            _WS,
            st.sampled_from(["", "±", "+-", "+/-", "-", "+"]),
            _WS,
            st.from_regex(r"\A[0-9]{0,4}(\.[0-9]{0,3})?\Z"),
            st.sampled_from(["", "e2", "9" * 20]),
            _WS,
            st.sampled_from(["%", "", "%%", "x"]),
            _WS,
        ),
    ),
    st.builds(
        lambda w, a, b: a + w + b, st.sampled_from(["exact", "EXACT", "Exact", "off", "OFF", "of", "exat"]), _WS, _WS
    ),
)

expectation_like = st.one_of(
    st.text(max_size=12),
    st.builds(
        "".join,
        st.tuples(
            _WS,
            st.sampled_from([">=", "<=", "==", ">", "<", "=>", "=", "!="]),
            _WS,
            st.from_regex(r"\A[0-9]{0,4}(\.[0-9]{0,3})?\Z"),
            st.sampled_from(["", "e5", "E-3", "e+999", "e"]),
            _WS,
            st.sampled_from(["x", "", "X", "xx"]),
            _WS,
        ),
    ),
)


@PROPERTY
@given(tolerance_like)
def test_the_tolerance_pattern_takes_what_parse_tolerance_takes(text: str) -> None:
    try:
        parse_tolerance(text)
        parsed = True
    except ValueError:
        parsed = False
    matched = _TOL_PATTERN.search(text) is not None
    if parsed:
        assert matched
    elif matched:  # only a number that rounds up to 100% gets past the pattern
        number = re.search(r"[0-9.]+", text)
        assert number and float(number.group()) >= 100


@PROPERTY
@given(expectation_like)
def test_the_expectation_pattern_takes_what_parse_expectation_takes(text: str) -> None:
    try:
        parse_expectation(text)
        parsed = True
    except ValueError:
        parsed = False
    matched = _EXPECT_PATTERN.search(text) is not None
    if parsed:
        assert matched
    elif matched:  # only a bound too large for a float gets past the pattern
        number = re.search(r"[0-9.]+(?:[eE][-+]?[0-9]+)?", text)
        assert number and float(number.group()) == float("inf")


@pytest.mark.parametrize(
    "pattern", [r"(\w|\w)*@$", r"(x+)+y", r"((ab)*c)*", r"(?:a|ab)+c", r"(?>(a*)*)b", r"(?=(a+)+)x"]
)
def test_a_pattern_that_can_backtrack_exponentially_is_refused_when_loaded(tmp_path: Path, pattern: str) -> None:
    """Matching runs in C and ignores SIGTERM: a pattern that repeats what can match in more than
    one way is refused by fuseci check (and every command that loads the suite), in one line."""
    spec = "{allow_new: ['" + pattern + "']}"
    text = GOOD.replace(_FUSED, f"fused: {{fn: a:b, framework: torch, ledger: {spec}}}")
    path = write(tmp_path / "s.yaml", text)
    with pytest.raises(SuiteError, match="exponential time") as caught:
        load_suite(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    result = invoke("check", path)
    assert result.exit_code == 3 and "exponential time" in result.output, result.output


@pytest.mark.parametrize("pattern", ["triton_.*", r"triton_(poi|red)_fused_.*", r"[\w]*@", "triton_.*_fused_.*", "a++"])
def test_ordinary_kernel_patterns_still_load(tmp_path: Path, pattern: str) -> None:
    spec = "{allow_new: ['" + pattern + "']}"
    text = GOOD.replace(_FUSED, f"fused: {{fn: a:b, framework: torch, ledger: {spec}}}")
    assert load_suite(write(tmp_path / "s.yaml", text)).cases
