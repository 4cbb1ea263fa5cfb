"""Schema errors: each names the field path, what is accepted, and a close match when one exists."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import MINIMAL_SUITE, case_of, write
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseci.config.dtypes import DTYPE_NAMES
from fuseci.config.model import CACHE_CONTROLS, CLOCK_CONTROLS, DISTRIBUTIONS, REPLAY_MODES
from fuseci.config.parse import load_suite
from fuseci.config.policy import BRIEF_MAX, brief_repr
from fuseci.errors import SuiteError

GOOD = MINIMAL_SUITE
X = "{shape: [1024]}"


def _error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path / "s.yaml", text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert message.startswith(f"{path}:"), message  # every one of these has a line
    assert "\n" not in message
    return message[len(str(path)) :]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # misspelt values: the close match, then every accepted value
        (
            GOOD.replace(X, "{shape: [1024], dtype: flaot32}"),
            ":5: case 'c1'.inputs.x.dtype: unsupported dtype 'flaot32'; did you mean 'float32'? choose one of "
            + ", ".join(DTYPE_NAMES),
        ),
        (
            GOOD + "defaults: {dtype: f16}\n",
            ":9: defaults.dtype: unsupported dtype 'f16'; did you mean 'float16'? choose one of "
            + ", ".join(DTYPE_NAMES),
        ),
        (
            GOOD.replace(X, "{shape: [1024], dtype: complex64}"),
            "unsupported dtype 'complex64'; choose one of " + ", ".join(DTYPE_NAMES),
        ),
        (
            GOOD.replace(X, "{shape: [1024], distribution: unifrom}"),
            ":5: case 'c1'.inputs.x.distribution: unknown distribution 'unifrom'; did you mean 'uniform'? choose one of "
            + ", ".join(DISTRIBUTIONS),
        ),
        (
            GOOD + "defaults: {distribution: rand_int}\n",
            ":9: defaults.distribution: unknown distribution 'rand_int'; did you mean 'randint'?",
        ),
        (
            GOOD + "ncu: {clock_control: bsae}\n",
            ":9: ncu.clock_control: unknown setting 'bsae'; did you mean 'base'? choose one of "
            + ", ".join(CLOCK_CONTROLS),
        ),
        (
            GOOD + "ncu: {cache_control: al}\n",
            ":9: ncu.cache_control: unknown setting 'al'; did you mean 'all'? choose one of "
            + ", ".join(CACHE_CONTROLS),
        ),
        (
            GOOD + "ncu: {replay_mode: kernal}\n",
            ":9: ncu.replay_mode: unknown setting 'kernal'; did you mean 'kernel'? choose one of "
            + ", ".join(REPLAY_MODES),
        ),
        (GOOD + "ncu: {replay_mode: 3}\n", ":9: ncu.replay_mode: unknown setting 3; choose one of kernel, application"),
        (
            GOOD + "    gates: {launches: exat}\n",
            ":9: case 'c1'.gates.launches: cannot parse tolerance 'exat': did you mean 'exact'? write 'exact', 'off' or a percentage below 100% like '3%'",
        ),
        (
            GOOD + "    gates: {launches: off}\n",
            "case 'c1'.gates.launches: got false: YAML reads a bare off, no or false as a boolean; write 'off' in quotes",
        ),
        # misspelt keys: the close match, then every allowed key
        (
            GOOD.replace("    variants:", "    varaints: {}\n    variants:"),
            ":6: case 'c1': unknown key 'varaints'; did you mean 'variants'? allowed keys: id, description, inputs, params, reference, variants, correctness, gates, expect",
        ),
        (
            GOOD + "ncu: {timeuot: 5}\n",
            ":9: ncu: unknown key 'timeuot'; did you mean 'timeout'? allowed keys: clock_control, cache_control, replay_mode, tma, timeout",
        ),
        (
            GOOD.replace(X, "{shape: [1024], sed: 1}"),
            ":5: case 'c1'.inputs.x: unknown key 'sed'; did you mean 'seed'? allowed keys: shape, dtype, distribution, seed, low, high, mean, std",
        ),
        (
            GOOD + "    gates: {dram_bytes: 3%}\n",
            "case 'c1'.gates: cannot gate 'dram_bytes'; did you mean 'dram__bytes.sum'? gateable: launches, dram__bytes.sum",
        ),
        (
            GOOD + "    expect: {time: '>= 2x'}\n",
            "case 'c1'.expect: no gain named 'time'; expectations apply to: launches, dram__bytes.sum",
        ),
        # a misspelt key in a block mapping: the key's own line, not the block's
        (
            GOOD + "    gates:\n      launches: exact\n      dram_bytes: 1%\n",
            ":11: case 'c1'.gates: cannot gate 'dram_bytes'",
        ),
        (
            GOOD + "    expect:\n      launches: '== 2x'\n      time: '>= 2x'\n",
            ":11: case 'c1'.expect: no gain named 'time'",
        ),
        (
            GOOD + "    params:\n      alpha: 1\n      2beta: 2\n",
            ":11: case 'c1'.params: param name '2beta' must be a Python identifier",
        ),
        # missing keys say what they look like
        (
            GOOD.replace(X, "{dtype: float32}"),
            ":5: case 'c1'.inputs.x: missing required key 'shape' (e.g. shape: [67108864])",
        ),
        (GOOD.replace("suite: demo\n", ""), ":1: top level: missing required key 'suite' (e.g. suite: mylib)"),
        # wrong types say what was found and what is accepted
        (GOOD + "description: [a, b]\n", ":9: description: expected a string, got list ['a', 'b']"),
        (
            GOOD.replace("  - id: c1\n", "  - id: c1\n    description: 3\n"),
            ":4: case 'c1'.description: expected a string, got integer 3; quote it",
        ),
        (GOOD + "defaults: [dtype]\n", ":9: defaults: expected a mapping, got list ['dtype']"),
        (
            GOOD.replace("    variants:", "    params: {alpha: {a: 1}}\n    variants:"),
            ":6: case 'c1'.params.alpha: expected a scalar (number, string or boolean), got mapping {'a': 1}",
        ),
        (
            GOOD.replace("    variants:", "    params: [1]\n    variants:"),
            ":6: case 'c1'.params: expected a mapping, got list [1]",
        ),
        (
            GOOD.replace("fused: kernels.elementwise:scale_relu_add_fused", "fused: 3"),
            ":8: case 'c1'.variants.fused: expected a 'module:function' string or a mapping {fn: ..., expect: ...}, got integer 3",
        ),
        (
            GOOD.replace(X, "{shape: [1024], seed: -1}"),
            ":5: case 'c1'.inputs.x.seed: expected a non-negative integer, got integer -1",
        ),
        (
            GOOD.replace(X, "{shape: [1024], seed: '7'}"),
            "case 'c1'.inputs.x.seed: expected a non-negative integer, got string '7'",
        ),
        (
            GOOD.replace(X, "{shape: [1024], mean: .nan}"),
            ":5: case 'c1'.inputs.x.mean: expected a finite number, got number nan",
        ),
        (
            GOOD.replace(X, "{shape: [1024], low: true}"),
            "case 'c1'.inputs.x.low: expected a finite number, got boolean True",
        ),
        (
            GOOD.replace(X, "{shape: [a]}"),
            ":5: case 'c1'.inputs.x.shape: expected a list of positive integers (or one), got list ['a']",
        ),
        (
            GOOD.replace(X, "{shape: 0}"),
            "case 'c1'.inputs.x.shape: expected a list of positive integers (or one), got integer 0",
        ),
        (
            GOOD.replace("[1024]", "[" + ", ".join(["1"] * 33) + "]"),
            "case 'c1'.inputs.x.shape: 33 dimensions; a tensor has at most 32",
        ),
        (
            GOOD.replace("[1024]", "[131072, 131072, 2]"),
            "has more than 17179869184 elements (2**34), more than any GPU holds",
        ),
        (GOOD + "ncu: {timeout: 0}\n", ":9: ncu.timeout: must be positive, got 0"),
        (GOOD + "ncu: {timeout: soon}\n", ":9: ncu.timeout: expected a finite number, got string 'soon'"),
        (
            GOOD + "    correctness: {atol: -1.0e-6}\n",
            ":9: case 'c1'.correctness.atol: must be a non-negative number, got -1e-06",
        ),
        (
            GOOD.replace(X, "{shape: [1024], distribution: uniform, low: 2, high: 1}"),
            "case 'c1'.inputs.x: low (2) must be below high (1) for uniform",
        ),
        (
            GOOD.replace(X, "{shape: [1024], distribution: randint, low: 0.2, high: 0.7}"),
            "case 'c1'.inputs.x: randint draws whole numbers in [low, high): [0, 0) holds none",
        ),
        (
            GOOD.replace(X, "{shape: [1024], dtype: int8, distribution: randint, low: 0, high: 1000}"),
            "case 'c1'.inputs.x: randint range [0, 1000) leaves what int8 holds (-128..127); narrow low/high",
        ),
        (
            GOOD.replace(X, "{shape: [1024], dtype: uint8, distribution: randint, low: -1, high: 10}"),
            "case 'c1'.inputs.x: randint range [-1, 10) leaves what uint8 holds (0..255)",
        ),
        (
            GOOD.replace(X, "{shape: [1024], distribution: randint, low: 0, high: 1.0e+30}"),
            "leaves what float32 holds (-9223372036854775808..9223372036854775807)",
        ),
        (
            GOOD.replace(X, "{shape: [1024], std: 0}"),
            "case 'c1'.inputs.x.std: must be positive for a normal distribution, got 0",
        ),
        (GOOD + "cases: {}\n", "key 'cases' appears twice"),
        ("suite: demo\ncases: {id: c1}\n", ":2: cases: expected a non-empty list of cases, got mapping {'id': 'c1'}"),
        (
            GOOD.replace("id: c1", "id: 'c 1'"),
            ":3: cases[0].id: 'c 1' is not a valid id: use letters, digits, '_' and '-' only",
        ),
        (
            GOOD.replace("x: {shape", "2x: {shape"),
            ":5: case 'c1'.inputs: input name '2x' must be a Python identifier",
        ),
        (
            GOOD.replace("    variants:", "    params: {x: 1}\n    variants:"),
            ":6: case 'c1'.params: ['x'] also named as inputs; rename the param or the input",
        ),
        (
            GOOD + "    reference: numpy.add\n",
            ":9: case 'c1'.reference: 'numpy.add' is not a 'module:function' reference",
        ),
        (GOOD + GOOD.split("cases:\n")[1], "case 'c1': duplicate case id (first defined on line 3); rename one"),
    ],
)
def test_error_names_the_field_and_what_is_accepted(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _error(tmp_path, text)


@pytest.mark.parametrize("key", ["defaults", "ncu", "description"])
def test_a_top_level_key_left_empty_means_its_default(tmp_path: Path, key: str) -> None:
    suite = load_suite(write(tmp_path / "s.yaml", GOOD + f"{key}:\n"))
    assert suite.description == "" and suite.ncu.timeout_s == 1800


@pytest.mark.parametrize("key", ["params", "gates", "expect", "correctness", "reference", "description"])
def test_a_case_key_left_empty_means_its_default(tmp_path: Path, key: str) -> None:
    case = case_of(load_suite(write(tmp_path / "s.yaml", GOOD + f"    {key}:\n")), "c1")
    assert case.params == {} and case.reference is None and case.description == ""
    assert str(case.gates["launches"]) == "exact"


@pytest.mark.parametrize("value", ["[]", "0", "''", "false"])
def test_an_empty_looking_value_that_is_not_null_is_refused(tmp_path: Path, value: str) -> None:
    message = _error(tmp_path, GOOD.replace("    variants:", f"    params: {value}\n    variants:"))
    assert "case 'c1'.params: expected a mapping, got" in message


def test_a_long_variant_form_with_bad_keys(tmp_path: Path) -> None:
    text = GOOD.replace("fused: kernels.elementwise:scale_relu_add_fused", "fused: {function: a:b}")
    message = _error(tmp_path, text)
    assert "case 'c1'.variants.fused: unknown key 'function'; allowed keys: fn, expect" in message


def test_an_odd_key_is_shown_in_brackets_on_one_line(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD.replace("x: {shape", '"x\\ny": {shape'))
    assert "case 'c1'.inputs: input name 'x\\ny' must be a Python identifier" in message


def test_long_values_are_cut_in_messages(tmp_path: Path) -> None:
    long_id = "x" * 10_000
    message = _error(tmp_path, GOOD.replace("id: c1", f"id: '{long_id}/'"))
    assert "is not a valid id" in message and len(message) < 300


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("x" * 10**6, "'" + "x" * 37 + "..." + "x" * 38 + "'"),
        (list(range(100)), "[0, 1, 2, 3, 4, 5, ...]"),
        ({"a": {"b": {"c": {"d": 1}}}}, "{'a': {'b': {'c': {...}}}}"),
        (10**5000, "<16610-bit integer>"),
        (b"\x00" * 1000, repr(b"\x00" * 80)[:157] + "..."),
    ],
    ids=["str", "list", "nested", "huge-int", "bytes"],
)
def test_brief_repr_is_bounded(value: object, shown: str) -> None:
    assert brief_repr(value) == shown


@given(
    st.recursive(
        st.text() | st.integers() | st.binary(), lambda c: st.lists(c) | st.dictionaries(st.text(), c), max_leaves=30
    )
)
@settings(max_examples=60, deadline=None, database=None)
def test_brief_repr_is_never_longer_than_its_limit(value: object) -> None:
    assert len(brief_repr(value)) <= BRIEF_MAX


def test_brief_repr_of_a_dict_subclass_and_a_cycle() -> None:
    class Sub(dict):  # the loader's line-tracking mappings are a dict subclass
        pass

    cyclic: list[object] = []
    cyclic.append(cyclic)
    assert brief_repr(Sub(a=list(range(50)))) == "{'a': [0, 1, 2, 3, 4, 5, ...]}"
    assert brief_repr(cyclic) == "[[[[...]]]]"
