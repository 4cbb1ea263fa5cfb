"""Malformed and hostile suite files: a one-line SuiteError, in bounded time, nothing executed.

The YAML-level cases run on both loaders: libyaml's parser (what PyPI's PyYAML wheels use) and
PyYAML's pure-Python one (the fallback), since their errors and limits differ.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import MINIMAL_SUITE, case_of, variant_of, write

from fuseci.config import yaml_loader as suite_mod
from fuseci.config.parse import load_suite
from fuseci.config.yaml_loader import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES
from fuseci.errors import SuiteError

GOOD = MINIMAL_SUITE

LOADERS = ["libyaml", "python"] if suite_mod.yaml.__with_libyaml__ else ["python"]


@pytest.fixture(params=LOADERS)
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "python":
        monkeypatch.setattr(suite_mod, "_Loader", suite_mod._PyLoader)
    yield request.param


def _error(path: Path, *, within_s: float = 5.0) -> str:
    """Load ``path``, expecting a one-line SuiteError that names the file, soon enough."""
    start = time.perf_counter()
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    elapsed = time.perf_counter() - start
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert "\n" not in message and "\r" not in message
    assert len(message) < 600, message
    assert elapsed < within_s, f"took {elapsed:.1f}s"
    return message


def _text_error(tmp_path: Path, text: str, **kw: float) -> str:
    return _error(write(tmp_path / "s.yaml", text), **kw)


def _bytes_error(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "s.yaml"
    path.write_bytes(data)
    return _error(path)


# --- size and bytes ---------------------------------------------------------------------------


def test_a_file_over_the_size_limit_says_its_size_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(GOOD.encode() + b"#" * (2 * MAX_FILE_BYTES - len(GOOD)) + b"\n")
    message = _error(path)
    assert "is 2.0 MiB, over the 1 MiB limit for a suite file" in message
    assert "split it" in message


def test_a_file_at_the_limit_is_read(tmp_path: Path) -> None:
    padding = "#" * (MAX_FILE_BYTES - len(GOOD) - 1) + "\n"
    suite = load_suite(write(tmp_path / "s.yaml", GOOD + padding))
    assert suite.name == "demo"


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_stream_is_read_no_further_than_the_limit() -> None:
    assert "over the 1 MiB limit" in _error(Path("/dev/zero"))


def test_a_directory(tmp_path: Path) -> None:
    assert "is a directory" in _error(tmp_path)


def test_not_utf8_names_line_and_byte(tmp_path: Path) -> None:
    message = _bytes_error(tmp_path, b"suite: demo\ncases: \xff\xfe\n")
    assert ":2: not a text file (byte 19, 0xff, is not UTF-8); save the suite as UTF-8" in message


@pytest.mark.parametrize(
    ("char", "what"),
    [
        ("\x00", "a NUL byte"),
        ("\x1b", "control character U+001B"),
        ("\x7f", "control character U+007F"),
        ("\x9b", "control character U+009B"),
        ("\ufffe", "character U+FFFE"),
    ],
)
def test_characters_yaml_forbids_are_located(tmp_path: Path, char: str, what: str) -> None:
    message = _text_error(tmp_path, f"suite: demo\ncases:\n  - id: c{char}1\n")
    assert f"s.yaml:3:10: {what} is not allowed in YAML; remove it" in message


def test_a_binary_file(tmp_path: Path) -> None:
    message = _bytes_error(tmp_path, bytes(range(256)) * 4)
    assert "not a text file" in message or "not allowed in YAML" in message


def test_a_byte_order_mark_is_fine(tmp_path: Path, loader: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert load_suite(path).name == "demo"


# --- aliases, depth, sizes ------------------------------------------------------------------


def _laughs(levels: int, where: str) -> str:
    """The billion laughs: each level a list of ten aliases of the level below."""
    anchors = ["&l0 lol"] + [f"&l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    bomb = f"[{', '.join(anchors)}]"
    return GOOD.replace("    variants:", f"    {where}: {bomb}\n    variants:")


@pytest.mark.parametrize("where", ["params", "description", "gates", "reference"])
def test_an_alias_bomb_is_refused_before_anything_walks_it(tmp_path: Path, loader: str, where: str) -> None:
    message = _text_error(tmp_path, _laughs(9, where), within_s=2.0)
    assert f"more than {MAX_NODES} values once its" in message
    assert "aliases are expanded (an alias bomb?)" in message


def test_a_merge_key_bomb_is_refused(tmp_path: Path, loader: str) -> None:
    levels = ["a0: &a0 {" + ", ".join(f"k{j}: {j}" for j in range(10)) + "}"]
    levels += [f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 10)}]}}" for i in range(1, 8)]
    text = GOOD.replace("    variants:", "    params:\n" + "".join(f"      {x}\n" for x in levels) + "    variants:")
    assert "an alias bomb?" in _text_error(tmp_path, text, within_s=2.0)


def test_many_aliases_within_the_limit_give_a_short_message_quickly(tmp_path: Path, loader: str) -> None:
    # 2**14 leaves: under the node limit, so the loader builds it and the checks walk into it;
    # the message must not repr the whole structure.
    anchors = ["&l0 [x, x]"] + [f"&l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, 14)]
    text = GOOD.replace("    variants:", f"    params: {{p: [{', '.join(anchors)}]}}\n    variants:")
    message = _text_error(tmp_path, text, within_s=2.0)
    assert "case 'c1'.params.p: expected a scalar (number, string or boolean), got list [" in message


def test_a_recursive_alias_is_refused(tmp_path: Path, loader: str) -> None:
    message = _text_error(tmp_path, GOOD.replace("    variants:", "    params: &p {p: [*p]}\n    variants:"))
    assert "s.yaml:6: alias *p is used inside the value it names (a recursive structure)" in message


def test_an_undefined_alias(tmp_path: Path, loader: str) -> None:
    assert "found undefined alias" in _text_error(tmp_path, GOOD + "description: *nowhere\n")


def test_a_huge_document_without_aliases_is_refused(
    tmp_path: Path, loader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 5000  # the real limit takes 1 s to reach with libyaml, 4 s without; the bombs above reach it
    monkeypatch.setattr(suite_mod, "MAX_NODES", limit)
    text = GOOD + "description:\n" + "  - 1\n" * (limit + 10)
    message = _text_error(tmp_path, text)
    assert f"the document holds more than {limit} values; a suite is far smaller" in message


@pytest.mark.parametrize("style", ["flow", "block"])
def test_deep_nesting_is_refused(tmp_path: Path, loader: str, style: str) -> None:
    depth = MAX_DEPTH + 10
    if style == "flow":
        text = GOOD + "description: " + "[" * depth + "]" * depth + "\n"
    else:
        text = GOOD + "description:\n" + "".join(" " * (2 * i + 2) + f"k{i}:\n" for i in range(depth))
    message = _text_error(tmp_path, text)
    assert f"nested more than {MAX_DEPTH} levels deep; a suite needs about 7" in message


def test_very_deep_nesting_never_overflows_the_stack(tmp_path: Path, loader: str) -> None:
    message = _text_error(tmp_path, GOOD + "description: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert "nest" in message and "a suite needs about 7" in message


def test_an_integer_too_long_to_convert(tmp_path: Path, loader: str) -> None:
    text = GOOD.replace("{shape: [1024]}", "{shape: [1024], seed: " + "9" * 5000 + "}")
    assert "s.yaml:5: an integer of 5000 characters; numbers in a suite need at most 64" in _text_error(tmp_path, text)


def test_a_sexagesimal_integer_too_long_to_compute(tmp_path: Path, loader: str) -> None:
    text = GOOD.replace("{shape: [1024]}", "{shape: [1024], seed: 1" + ":59" * 20_000 + "}")
    assert "numbers in a suite need at most 64" in _text_error(tmp_path, text)


@pytest.mark.parametrize(
    "value",
    ['">= ' + "1" * 100_000 + 'a"', '">= 1' + " " * 100_000 + 'a"', '"' + " " * 100_000 + '>= 1 a"'],
    ids=["digits", "trailing-spaces", "leading-spaces"],
)
def test_pathological_expectations_fail_fast(tmp_path: Path, value: str) -> None:
    message = _text_error(tmp_path, GOOD + f"    expect: {{launches: {value}}}\n", within_s=2.0)
    assert "cannot parse expectation" in message


def test_a_pathological_tolerance_fails_fast(tmp_path: Path) -> None:
    message = _text_error(tmp_path, GOOD + "    gates: {launches: '" + "1" * 100_000 + "a'}\n", within_s=2.0)
    assert "cannot parse tolerance" in message


def test_many_shape_dimensions(tmp_path: Path) -> None:
    message = _text_error(tmp_path, GOOD.replace("[1024]", "[" + ", ".join(["2"] * 1000) + "]"))
    assert "case 'c1'.inputs.x.shape: 1000 dimensions; a tensor has at most 32" in message


# --- document shape ---------------------------------------------------------------------------


@pytest.mark.parametrize(("separator", "line"), [("---\n", 9), ("...\n---\n", 10)])
def test_several_documents(tmp_path: Path, loader: str, separator: str, line: int) -> None:
    message = _text_error(tmp_path, GOOD + separator + GOOD)
    assert f"s.yaml:{line}: a second YAML document starts here; a suite file is one document" in message


def test_text_after_the_end_of_the_document(tmp_path: Path, loader: str) -> None:
    message = _text_error(tmp_path, GOOD + "...\n" + GOOD)
    assert "s.yaml:10:1: invalid YAML:" in message
    assert "a suite file is one YAML document: look for a stray '...' line" in message


def test_one_document_with_explicit_markers_is_fine(tmp_path: Path, loader: str) -> None:
    assert load_suite(write(tmp_path / "s.yaml", "---\n" + GOOD + "...\n")).name == "demo"


@pytest.mark.parametrize(
    ("text", "got"),
    [("- suite: demo\n", "got list [{'suite': 'demo'}]"), ("demo\n", "got string 'demo'"), ("42\n", "got integer 42")],
)
def test_a_top_level_that_is_not_a_mapping(tmp_path: Path, text: str, got: str) -> None:
    message = _text_error(tmp_path, text)
    assert (
        f"top level: expected a mapping with the keys 'suite' and 'cases', {got}; see docs/SUITES.md, 'Writing a suite'"
        in message
    )


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n", "null\n"])
def test_an_empty_document(tmp_path: Path, text: str) -> None:
    assert "the suite file is empty; see docs/SUITES.md for the format" in _text_error(tmp_path, text)


def test_an_unhashable_key(tmp_path: Path, loader: str) -> None:
    message = _text_error(tmp_path, GOOD + "? [a, b]\n: 1\n")
    assert "s.yaml:9: a mapping key must be a plain value, not a list" in message


def test_a_duplicate_key_says_how_to_fix_it(tmp_path: Path, loader: str) -> None:
    message = _text_error(tmp_path, GOOD.replace("suite: demo\n", "suite: demo\nsuite: again\n"))
    assert "s.yaml:2: key 'suite' appears twice in one mapping; keep one of them" in message


def test_merge_keys_may_be_overridden(tmp_path: Path, loader: str) -> None:
    text = (
        "suite: demo\n"
        "cases:\n"
        "  - id: c1\n"
        "    inputs:\n"
        "      x: &big {shape: [1024], distribution: uniform, low: 0, high: 2}\n"
        "      y: {<<: *big, high: 3}\n"
        "    variants: {unfused: a.b:c, fused: a.b:d}\n"
    )
    case = case_of(load_suite(write(tmp_path / "s.yaml", text)), "c1")
    assert [(i.name, i.high, i.distribution) for i in case.inputs] == [("x", 2.0, "uniform"), ("y", 3.0, "uniform")]


def test_a_merge_of_a_scalar(tmp_path: Path, loader: str) -> None:
    assert "invalid YAML" in _text_error(tmp_path, GOOD + "ncu: {<<: 3}\n")


# --- tags: nothing is constructed, nothing runs -------------------------------------------------


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system ['touch {marker}']",
        "!!python/object/new:os.system ['touch {marker}']",
        "!!python/name:os.system",
        "!!python/module:os",
        "!!python/tuple [1, 2]",
        "!custom {a: 1}",
    ],
)
def test_tags_that_build_objects_are_refused_and_nothing_runs(tmp_path: Path, loader: str, tag: str) -> None:
    marker = tmp_path / "ran"
    message = _text_error(tmp_path, GOOD + f"description: {tag.replace('{marker}', str(marker))}\n")
    assert "invalid YAML: could not determine a constructor for the tag" in message
    assert "a suite is plain data" in message
    assert not marker.exists()


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("!!bool maybe", "cannot read 'maybe' as !!bool"),
        ("!!int abc", "cannot read 'abc' as !!int"),
        ("!!int ''", "cannot read '' as !!int"),
        ("!!float abc", "cannot read 'abc' as !!float"),
        ("!!timestamp abc", "cannot read 'abc' as !!timestamp"),
        ("2024-13-01", "cannot read '2024-13-01' as !!timestamp"),
    ],
)
def test_core_tags_with_values_they_cannot_take(tmp_path: Path, loader: str, value: str, shown: str) -> None:
    message = _text_error(tmp_path, GOOD + f"description: {value}\n")
    assert f"s.yaml:9: {shown}; write a valid one, or quote it to make it a string" in message


@pytest.mark.parametrize(
    "value", ["!!map abc", "!!set abc", "!!omap abc", "!!pairs [1]", "!!seq abc", "!!str [1]", "!!binary '%%%'"]
)
def test_collection_tags_on_the_wrong_node(tmp_path: Path, loader: str, value: str) -> None:
    message = _text_error(tmp_path, GOOD + f"description: {value}\n")
    assert "s.yaml:9" in message or "description: expected a string" in message


def test_a_date_where_a_seed_goes(tmp_path: Path) -> None:
    message = _text_error(tmp_path, GOOD.replace("{shape: [1024]}", "{shape: [1024], seed: 2024-01-01}"))
    assert "case 'c1'.inputs.x.seed: expected a non-negative integer, got date datetime.date(2024, 1, 1)" in message


def test_no_function_the_suite_names_is_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "imported"
    write(tmp_path / "pkg_fuseci_probe.py", f"open({str(marker)!r}, 'w').close()\ndef f(**kw): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = GOOD.replace("kernels.elementwise:scale_relu_add_fused", "pkg_fuseci_probe:f")
    suite = load_suite(write(tmp_path / "s.yaml", text + "    reference: pkg_fuseci_probe:f\n"))
    assert variant_of(case_of(suite, "c1"), "fused").fn == "pkg_fuseci_probe:f"
    assert not marker.exists()
