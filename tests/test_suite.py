from pathlib import Path

import pytest
from helpers import MINIMAL_SUITE, SUITES, case_of, variant_of, write

from fuseci.config.model import UNFUSED
from fuseci.config.parse import load_suite
from fuseci.errors import SuiteError

GOOD = MINIMAL_SUITE


@pytest.mark.parametrize("path", sorted(SUITES.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_suites_load(path: Path) -> None:
    suite = load_suite(path)
    assert suite.cases
    for case in suite.cases:
        assert case.variants[0].id == UNFUSED
        assert [v for v in case.variants if v.id != UNFUSED]  # a fused variant beside unfused
        assert case.line > 0


def test_elementwise_defaults_and_overrides(elementwise) -> None:
    case = case_of(elementwise, "scale_relu_add")
    assert [i.name for i in case.inputs] == ["x", "y"]
    assert case.inputs[0].shape == (67108864,)
    assert case.inputs[0].seed != case.inputs[1].seed  # each tensor gets its own stream
    assert str(case.gates["launches"]) == "exact"
    assert case.gates["dram__bytes.sum"].relative == pytest.approx(0.01)
    assert variant_of(case, "fused").expect["dram__bytes.sum"].bound == 2.0
    assert case_of(elementwise, "bias_gelu").correctness.atol == 1e-5
    assert elementwise.ncu.clock_control == "none"
    assert elementwise.ncu.cache_control == "all"


def test_inputs_are_large_enough_to_defeat_l2(elementwise) -> None:
    # 4x the 60 MB L2 of an H200: DRAM writes do not hide in the cache.
    for case in elementwise.cases:
        assert max(i.nbytes for i in case.inputs) >= 4 * 60e6, case.id


def _error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path / "s.yaml", text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message
    return message


def test_good_minimal_suite(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path / "s.yaml", GOOD))
    assert suite.name == "demo"
    assert case_of(suite, "c1").gates["gpu__time_duration.sum"].relative == pytest.approx(0.10)


def test_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    message = _error(tmp_path, "suite: demo\ncases: [\n")
    assert "s.yaml:3:1" in message and "invalid YAML" in message


def test_unknown_key_suggests_the_right_one(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD.replace("    variants:", "    varaints: {}\n    variants:"))
    assert "did you mean 'variants'" in message
    assert ":6:" in message  # the line of the misspelt key itself


def test_slash_in_variant_id_is_rejected(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD.replace("      fused: kernels", "      fused/v2: kernels"))
    assert "'fused/v2' is not a valid id" in message


def test_missing_unfused_variant(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD.replace("unfused:", "baseline:"))
    assert "missing the 'unfused' variant" in message


def test_only_unfused_variant(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD.replace("      fused: kernels.elementwise:scale_relu_add_fused\n", ""))
    assert "at least one fused variant" in message


def test_duplicate_case_id(tmp_path: Path) -> None:
    case = GOOD.split("cases:\n")[1]
    message = _error(tmp_path, GOOD + case)
    assert "duplicate case id" in message and "first defined on line 3" in message


def test_duplicate_key(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD.replace("suite: demo\n", "suite: demo\nsuite: again\n"))
    assert "s.yaml:2: key 'suite' appears twice" in message


def test_bad_tolerance_names_case_and_key(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD + "    gates: {dram__bytes.sum: 'five percent'}\n")
    assert "case 'c1'.gates.dram__bytes.sum" in message and "cannot parse tolerance" in message


def test_ungateable_quantity(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD + "    gates: {dram_bytes: 3%}\n")
    assert "cannot gate 'dram_bytes'" in message and "did you mean 'dram__bytes.sum'" in message


def test_bad_expectation(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD + "    expect: {launches: 3}\n")
    assert "bare number" in message


@pytest.mark.parametrize(
    ("shape", "fragment"),
    [
        ("[0]", "positive integers"),
        ("[-1]", "positive integers"),
        ("[]", "positive integers"),
        ("[1.5]", "positive integers"),
        ("[1000000, 1000000, 1000000]", "more than any GPU holds"),
    ],
)
def test_impossible_shapes(tmp_path: Path, shape: str, fragment: str) -> None:
    assert fragment in _error(tmp_path, GOOD.replace("[1024]", shape))


def test_unsupported_dtype(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD.replace("{shape: [1024]}", "{shape: [1024], dtype: float128}"))
    assert "unsupported dtype 'float128'" in message and "float32" in message


def test_bad_function_reference(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD.replace("kernels.elementwise:scale_relu_add_fused", "kernels/elementwise.py"))
    assert "not a 'module:function' reference" in message


def test_empty_file(tmp_path: Path) -> None:
    assert "empty" in _error(tmp_path, "")


def test_empty_case_list(tmp_path: Path) -> None:
    assert "non-empty list of cases" in _error(tmp_path, "suite: demo\ncases: []\n")


def test_python_object_tags_are_refused(tmp_path: Path) -> None:
    message = _error(tmp_path, "suite: !!python/object/apply:os.system ['true']\ncases: []\n")
    assert "invalid YAML" in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="suite file not found"):
        load_suite(tmp_path / "nope.yaml")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(b"suite: \xff\xfe\n")
    with pytest.raises(SuiteError, match="not UTF-8"):
        load_suite(path)


def test_bad_ncu_setting(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD + "ncu: {clock_control: locked}\n")
    assert "ncu.clock_control" in message and "none, base" in message


def test_params_clash_with_inputs(tmp_path: Path) -> None:
    message = _error(tmp_path, GOOD.replace("    variants:", "    params: {x: 1}\n    variants:"))
    assert "also named as inputs" in message
