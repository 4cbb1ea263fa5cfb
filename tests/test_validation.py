"""fuseci.validation: the base model, the shared types and pydantic's errors in fuseci's words."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from pydantic import Field, ValidationError, field_validator

from fuseci import validation as v
from fuseci import wording


class Timing(v.Model):
    variant: v.Id
    median_ns: v.Amount
    spread_ns: v.Amount | None = None
    calls: Annotated[v.Items[v.Amount], Field(max_length=5)] = ()
    error: v.Number = 0.0
    status: Annotated[str, v.Choice(("ok", "failed"))] = "ok"
    runs: v.Count = 0
    shape: v.Count | Annotated[list[v.Count], Field(max_length=3)] = 1
    in_metric: Annotated[v.QuantityName, Field(alias="in")] = "x"

    @field_validator("calls")
    @classmethod
    def _not_two(cls, calls: tuple[float, ...]) -> tuple[float, ...]:
        if len(calls) == 2:
            raise ValueError("two calls are too few to take a median from; measure three")
        return calls


class Doc(v.Model):
    suite: v.Id
    env: v.Env = Field(default_factory=dict)
    cases: Annotated[dict[v.Id, list[Timing]], Field(max_length=3)] = Field(default_factory=dict)
    extra: Timing | v.Text | None = None


def problems(model: type[v.Model], data: Any) -> list[tuple[str, str]]:
    with pytest.raises(v.Invalid) as info:
        v.validate(model, data)
    return [(p.where, p.message) for p in info.value.problems]


def one(model: type[v.Model], data: Any) -> tuple[str, str]:
    found = problems(model, data)
    assert len(found) == 1, found
    return found[0]


def timing(**changes: Any) -> dict[str, Any]:
    return {"variant": "fused", "median_ns": 10, **changes}


# --- what the models take ---------------------------------------------------------------------


def test_a_good_document_reads_into_frozen_typed_models() -> None:
    doc = v.validate(
        Doc,
        {
            "suite": "s",
            "env": {"gpu": "H100", "sm": 90, "clocks": True, "ratio": 1.5, "driver": None},
            "cases": {"c": [timing(calls=[1, 2.5, 3], error=math.inf, **{"in": "dram__bytes.sum"})]},
        },
    )
    t = doc.cases["c"][0]
    assert t.median_ns == 10.0 and isinstance(t.median_ns, float)  # an integer is taken as a number
    assert t.calls == (1.0, 2.5, 3.0) and t.error == math.inf and t.in_metric == "dram__bytes.sum"
    assert doc.env["sm"] == 90 and doc.env["clocks"] is True
    with pytest.raises(ValidationError):
        t.runs = 3  # type: ignore[misc]
    assert v.validate(Timing, timing(error=math.nan)).error != v.validate(Timing, timing(error=math.nan)).error


@pytest.mark.parametrize(
    ("changes", "where", "message"),
    [
        ({"runs": True}, "runs", "expected an integer, got a boolean true"),
        ({"runs": 1.0}, "runs", "expected an integer, got a number 1.0"),
        ({"median_ns": "1"}, "median_ns", 'expected a number, got a string "1"'),
        ({"median_ns": True}, "median_ns", "expected a number, got a boolean true"),
        ({"median_ns": math.inf}, "median_ns", "expected a finite number, got inf"),
        ({"median_ns": math.nan}, "median_ns", "expected a finite number, got nan"),
        ({"spread_ns": -math.inf}, "spread_ns", "expected a finite number, got -inf"),
        ({"median_ns": -1}, "median_ns", "-1 is below the smallest value allowed, 0"),
        ({"runs": 2**63}, "runs", f"{2**63} is too large: the limit is below {2**63}"),
        ({"runs": -1}, "runs", "-1 is below the smallest value allowed, 0"),
        ({"error": "nan"}, "error", 'expected a number, got a string "nan"'),
        ({"variant": "a/b"}, "variant", "expected an id (letters, digits, '_' and '-'), got a string \"a/b\""),
        ({"variant": "a\n"}, "variant", "expected an id (letters, digits, '_' and '-'), got a string \"a\\n\""),
        ({"variant": 3}, "variant", "expected an id (letters, digits, '_' and '-'), got a number 3"),
        (
            {"variant": "i" * (v.MAX_ID_CHARS + 1)},
            "variant",
            f"a string of {v.MAX_ID_CHARS + 1} characters, more than the {v.MAX_ID_CHARS} allowed",
        ),
        ({"in": "a b"}, "in", 'expected a quantity name, got a string "a b"'),
        ({"status": "faild"}, "status", "a string \"faild\" is not one of 'ok', 'failed'; did you mean 'failed'?"),
        ({"status": 7}, "status", "a number 7 is not one of 'ok', 'failed'"),
        ({"calls": [1, 2, 3, 4, 5, 6]}, "calls", "a list of 6, more than the 5 allowed"),
        ({"calls": {"a": 1}}, "calls", "expected a list, got an object of 1"),
        ({"calls": [1, "x", 3]}, "calls[1]", 'expected a number, got a string "x"'),
        ({"calls": [1, 2]}, "calls", "two calls are too few to take a median from; measure three"),
        ({"shape": "8, 8"}, "shape", 'expected an integer or a list, got a string "8, 8"'),
        ({"shape": [8, -8]}, "shape[1]", "-8 is below the smallest value allowed, 0"),
        ({"shape": [1, 2, 3, 4]}, "shape", "a list of 4, more than the 3 allowed"),
    ],
)
def test_each_wrong_value_is_named_with_its_place_in_fuseci_words(
    changes: dict[str, Any], where: str, message: str
) -> None:
    assert one(Timing, timing(**changes)) == (where, message)


def test_a_missing_key_is_placed_at_the_object_that_lacks_it() -> None:
    with pytest.raises(v.Invalid) as info:
        v.validate(Doc, {"suite": "s", "cases": {"c": [{"variant": "f"}]}})
    (problem,) = info.value.problems
    assert (problem.where, problem.message, problem.type, problem.key) == (
        "cases.c[0]",
        "missing required key 'median_ns'",
        "missing",
        "median_ns",
    )
    assert str(info.value) == "cases.c[0]: missing required key 'median_ns'"
    assert (info.value.where, info.value.problem) == ("cases.c[0]", "missing required key 'median_ns'")


def test_an_unknown_key_names_the_allowed_ones_and_the_closest() -> None:
    assert one(Timing, timing(meidan_ns=3)) == (
        "meidan_ns",
        "unknown key 'meidan_ns'; did you mean 'median_ns'? allowed keys: variant, median_ns, spread_ns, calls, "
        "error, status, runs, shape, in",
    )
    # nested, inside a union's branch and with an alias: the keys of the model found there
    found = problems(Doc, {"suite": "s", "extra": timing(inn="x"), "cases": {"c": [timing(zzz=1)]}})
    assert found[0][0] == "cases.c[0].zzz" and "allowed keys: variant," in found[0][1] and "did you" not in found[0][1]
    assert found[1][0] == "extra.inn" and "did you mean 'in'?" in found[1][1]
    assert one(Doc, {"suite": "s", "x" * 100: 1})[1].startswith("unknown key '" + "x" * 58 + "...; allowed keys: suite")


def test_every_problem_of_a_document_is_reported_at_once() -> None:
    found = problems(
        Doc,
        {"suit": "s", "env": {"a": [1]}, "cases": {"c/": [timing(runs=True)], "d": [timing(median_ns=None)]}},
    )
    assert found == [
        ("", "missing required key 'suite'"),
        ("env.a", "expected a string, a finite number, true, false or null, got a list of 1"),
        ('cases["c/"]', "not a valid key: expected an id (letters, digits, '_' and '-'), got a string \"c/\""),
        ('cases["c/"][0].runs', "expected an integer, got a boolean true"),
        ("cases.d[0].median_ns", "expected a number, got null"),
        ("suit", "unknown key 'suit'; did you mean 'suite'? allowed keys: suite, env, cases, extra"),
    ]


def test_a_union_reports_the_branch_the_value_came_closest_to() -> None:
    # an object: the model's complaint, not the string's
    assert one(Doc, {"suite": "s", "extra": timing(runs=-1)}) == (
        "extra.runs",
        "-1 is below the smallest value allowed, 0",
    )
    # a value of neither type: one message naming both
    assert one(Doc, {"suite": "s", "extra": 3}) == ("extra", "expected an object or a string, got a number 3")
    assert one(Doc, {"suite": "s", "extra": "x" * (1 << 20 + 1)})[1].startswith("a string of 2097152 characters")


@pytest.mark.parametrize(
    ("env", "where", "message"),
    [
        ({"a": {"b": 1}}, "env.a", "expected a string, a finite number, true, false or null, got an object of 1"),
        ({"a": math.nan}, "env.a", "expected a string, a finite number, true, false or null, got a number NaN"),
        ({"a": "x" * 5000}, "env.a", "a string of 5000 characters, more than the 4096 allowed"),
        (
            {"k" * 201: 1},
            'env["' + "k" * 60 + '"...]',
            "not a valid key: a string of 201 characters, more than the 200 allowed",
        ),
        ({str(i): i for i in range(1001)}, "env", "an object of 1001 entries, more than the 1000 allowed"),
        ([], "env", "expected an object, got a list of 0"),
        ({1: 1}, "env[1]", "not a valid key: expected a string, got a number 1"),
    ],
)
def test_an_environment_holds_bounded_scalars(env: Any, where: str, message: str) -> None:
    assert one(Doc, {"suite": "s", "env": env}) == (where, message)


def test_the_whole_document_of_the_wrong_type() -> None:
    assert one(Doc, [1, 2]) == ("", "expected an object, got a list of 2")
    assert one(Doc, None) == ("", "expected an object, got null")
    with pytest.raises(v.Invalid) as info:
        v.validate(Doc, "x", at=("suites", "a", "record"))
    assert str(info.value) == 'suites.a.record: expected an object, got a string "x"'


def test_the_wording_of_values_and_objects_can_be_a_yaml_files() -> None:
    with pytest.raises(ValidationError) as info:
        Doc.model_validate({"suite": "s", "env": [1]})
    (problem,) = v.problems(info.value, {"suite": "s", "env": [1]}, Doc, show=repr, mapping="a mapping")
    assert problem.message == "expected a mapping, got [1]"


def test_json_paths() -> None:
    assert v.json_path(("cases", "bias_gelu", "timings", 0, "median_ns")) == "cases.bias_gelu.timings[0].median_ns"
    assert v.json_path(("values", "dram__bytes.sum")) == 'values["dram__bytes.sum"]'
    assert v.json_path(("a-b",)) == '["a-b"]' and v.json_path((0, "x")) == "[0].x" and v.json_path(()) == ""
    assert v.json_path(("cases", "a" * 70_000)) == 'cases["' + "a" * 60 + '"...]'
    assert v.json_path(("x\ny",)) == '["x\\ny"]'


def test_values_are_shown_short_and_on_one_line() -> None:
    assert v.shown("x") == 'a string "x"' and v.shown(None) == "null" and v.shown(True) == "a boolean true"
    assert v.shown([1, 2]) == "a list of 2" and v.shown({}) == "an object of 0" and v.shown(1.5) == "a number 1.5"
    long = v.shown("a\nb" * 10_000)
    assert long.startswith('a string "a\\nba\\nb') and long.endswith("...") and len(long) == len("a string ") + 63
    assert "\n" not in v.shown("\n" * 100) and len(v.shown("y" * 10**6)) < 80


def test_did_you_mean() -> None:
    assert wording.did_you_mean("shpe", ("shape", "dtype")) == "did you mean 'shape'? "
    assert wording.did_you_mean("zzz", ("shape",)) == "" and wording.did_you_mean(3, ("shape",)) == ""
    assert wording.did_you_mean("s" * 101, ("s" * 101,)) == ""


def test_a_nested_list_of_the_wrong_type() -> None:
    assert one(Doc, {"suite": "s", "cases": {"c": "x"}}) == ("cases.c", 'expected a list, got a string "x"')
    assert one(Doc, {"suite": "s", "cases": {"c": [[]]}}) == ("cases.c[0]", "expected an object, got a list of 0")
    assert one(Doc, {"suite": "s", "cases": {k: [] for k in "abcd"}}) == (
        "cases",
        "an object of 4 entries, more than the 3 allowed",
    )


def test_the_json_schema_states_the_types_constraints() -> None:
    schema = Timing.model_json_schema()
    fields = schema["properties"]
    assert fields["status"]["enum"] == ["ok", "failed"]
    assert fields["variant"] == {
        "maxLength": v.MAX_ID_CHARS,
        "pattern": v.ID_PATTERN.pattern,
        "title": "Variant",
        "type": "string",
    }
    assert fields["runs"]["minimum"] == 0 and fields["runs"]["type"] == "integer"
    assert fields["calls"]["maxItems"] == 5 and "in" in fields and schema["additionalProperties"] is False
    assert set(schema["required"]) == {"variant", "median_ns"}


def test_a_named_choice_and_a_wrong_key_of_a_map() -> None:
    class Input(v.Model):
        dtype: Annotated[str, v.Choice(("float32", "float16"), what="unsupported dtype")] = "float32"
        by_id: dict[v.Id, int] = Field(default_factory=dict)

    data = {"dtype": "flaot32", "by_id": {"a/b": 1}}
    with pytest.raises(v.Invalid) as info:
        v.validate(Input, data)
    dtype, key = info.value.problems
    assert dtype.message == "unsupported dtype 'flaot32'; did you mean 'float32'? choose one of float32, float16"
    assert not dtype.on_key
    assert (key.loc, key.on_key, key.key) == (("by_id", "a/b"), True, "a/b")
    assert key.message.startswith("not a valid key: expected an id")


# --- documents that code builds too, open objects, enums, integers kept ---------------------------


class Status(enum.Enum):
    OK = "ok"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Check(v.Document):
    variant: v.Id
    error: Annotated[v.Amount, v.AsWritten]
    status: Annotated[Status, v.Choice(tuple(s.value for s in Status))] = Status.OK
    calls: v.Items[v.Amount] = ()


@dataclass(frozen=True, slots=True)
class Run(v.OpenDocument):
    checks: v.Items[Check]


class Summary(v.OpenModel):
    runs: v.Count


def test_a_document_dataclass_is_validated_as_a_model_and_built_as_a_dataclass() -> None:
    read = v.validate(Run, {"checks": [{"variant": "a", "error": 0.5, "status": "failed", "calls": [1, 2]}]})
    assert read == Run((Check("a", 0.5, Status.FAILED, (1.0, 2.0)),))
    assert Check("b", 1).status is Status.OK  # built by code: a plain dataclass, nothing checked
    for bad, where, problem in (
        ({"checks": [{"variant": "a", "error": True}]}, "checks[0].error", "expected a number, got a boolean true"),
        ({"checks": [{"variant": "a", "error": "1"}]}, "checks[0].error", 'expected a number, got a string "1"'),
        ({"checks": [{"variant": "a"}]}, "checks[0]", "missing required key 'error'"),
        ({"checks": [{"variant": "a", "error": 1, "eror": 2}]}, "checks[0].eror", "unknown key 'eror'; did you"),
        ({"checks": [{"variant": "a", "error": 1, "status": 3}]}, "checks[0].status", "a number 3 is not one of 'ok'"),
        ({"checks": {}}, "checks", "expected a list, got an object of 0"),
        ({"checks": [[]]}, "checks[0]", "expected an object, got a list of 0"),
    ):
        with pytest.raises(v.Invalid) as info:
            v.validate(Run, bad)
        assert (info.value.where, info.value.problem[: len(problem)]) == (where, problem), info.value
    with pytest.raises(v.Invalid, match="allowed keys: variant, error, status, calls"):
        v.validate(Check, {"variant": "a", "error": 1, "x": 0})


def test_open_objects_leave_out_keys_a_newer_file_may_add() -> None:
    assert v.validate(Run, {"checks": [], "note": "new"}) == Run(())
    assert v.validate(Summary, {"runs": 2, "note": "new"}).runs == 2
    with pytest.raises(v.Invalid, match="runs: expected an integer"):
        v.validate(Summary, {"runs": "2", "note": "new"})


def test_a_choice_of_an_enum_gives_its_member() -> None:
    assert v.validate(Check, {"variant": "a", "error": 1, "status": "failed"}).status is Status.FAILED
    with pytest.raises(v.Invalid, match=r"a string \"fail\" is not one of 'ok', 'failed'; did you mean 'failed'\?"):
        v.validate(Check, {"variant": "a", "error": 1, "status": "fail"})


def test_as_written_keeps_an_integer_an_integer() -> None:
    assert type(v.validate(Check, {"variant": "a", "error": 3}).error) is int  # written back as 3, not 3.0
    assert type(v.validate(Check, {"variant": "a", "error": 3.0}).error) is float
    with pytest.raises(v.Invalid, match="-1 is below the smallest value allowed, 0"):
        v.validate(Check, {"variant": "a", "error": -1})
