"""Input tensors: the Philox4x32-10 generator and the values each distribution makes of it, on
the host (the reference the GPU kernel is checked against in ``test_gpu.py``)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from helpers import MINIMAL_SUITE, write
from philox import host_values, philox4x32

from fuseci.config.model import INT_RANGES, InputSpec
from fuseci.config.parse import load_suite
from fuseci.errors import HarnessError
from fuseci.harness.inputs import randint_bounds

# Random123's published known-answer vectors for Philox4x32-10: (counter, key, output).
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize(("counter", "key", "expected"), KNOWN_ANSWERS)
def test_philox_gives_random123s_known_answers(counter, key, expected) -> None:
    got = philox4x32(np.array([counter], dtype=np.uint32), key)
    assert tuple(int(x) for x in got[0]) == expected


def spec(**kw) -> InputSpec:
    base = {"name": "x", "shape": (20000,), "dtype": "float64", "distribution": "normal", "seed": 12345}
    return InputSpec(**(base | kw))


def test_a_tensor_is_a_function_of_its_seed_and_element_index() -> None:
    a = host_values(spec())
    assert np.array_equal(a, host_values(spec()))  # the same on every run
    assert np.array_equal(a[:100], host_values(spec(), count=100))  # element i does not depend on the size
    other = host_values(spec(seed=12346))
    assert np.mean(a == other) < 1e-3  # another seed, another tensor
    assert len(np.unique(a)) == len(a)  # no repeats in 20,000 doubles


@pytest.mark.parametrize("seed", [0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**64 - 1])
def test_normal_has_its_mean_and_spread_for_any_seed(seed: int) -> None:
    v = host_values(spec(seed=seed, mean=3.0, std=2.0))
    n = len(v)
    assert abs(v.mean() - 3.0) < 5 * 2.0 / math.sqrt(n)
    assert abs(v.std() - 2.0) < 0.05
    assert abs(np.mean(v < 3.0) - 0.5) < 0.02  # symmetric
    assert abs(np.mean(np.abs(v - 3.0) < 2.0) - 0.6827) < 0.02  # one sigma
    assert np.all(np.isfinite(v))


def test_uniform_fills_its_interval_evenly() -> None:
    v = host_values(spec(distribution="uniform", low=-1.0, high=3.0, shape=(40000,)))
    assert v.min() >= -1.0 and v.max() < 3.0
    counts, _ = np.histogram(v, bins=20, range=(-1.0, 3.0))
    expected = len(v) / 20
    assert np.all(np.abs(counts - expected) < 5 * math.sqrt(expected))


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"])
def test_randint_draws_every_whole_number_of_its_range_in_its_dtype(dtype: str) -> None:
    v = host_values(spec(distribution="randint", dtype=dtype, low=-3 if dtype != "uint8" else 0, high=7))
    assert v.dtype == np.dtype(dtype)
    values, counts = np.unique(v, return_counts=True)
    assert list(values) == list(range(-3 if dtype != "uint8" else 0, 7))
    expected = len(v) / len(values)
    assert np.all(np.abs(counts - expected) < 5 * math.sqrt(expected))


@pytest.mark.parametrize("dtype", sorted(INT_RANGES))
def test_randint_reaches_both_ends_of_a_full_dtype(dtype: str) -> None:
    first, last = INT_RANGES[dtype]
    v = host_values(spec(distribution="randint", dtype=dtype, low=first, high=last + 1))
    assert v.dtype == np.dtype(dtype)
    if dtype in ("int8", "uint8"):
        assert v.min() == first and v.max() == last
    else:  # spread over the whole range
        assert (
            v.min() < first / 2 + last / 2 - (last - first) / 4 and v.max() > first / 2 + last / 2 + (last - first) / 4
        )


def test_float16_and_float32_are_the_float64_value_rounded() -> None:
    wide = host_values(spec(dtype="float64"))
    for dtype in ("float32", "float16"):
        narrow = host_values(spec(dtype=dtype))
        assert narrow.dtype == np.dtype(dtype)
        assert np.array_equal(narrow, wide.astype(np.float32).astype(dtype))


@pytest.mark.parametrize(("low", "high"), [(5, 5), (0.2, 0.7), (0, 300)])
def test_randint_bounds_refuse_an_empty_range_or_one_the_dtype_cannot_hold(low: float, high: float) -> None:
    with pytest.raises(HarnessError, match=r"input 'x': randint (range|draws)"):
        randint_bounds(spec(distribution="randint", dtype="uint8", low=low, high=high))


def test_randint_bounds_of_the_widest_range() -> None:
    first, last = INT_RANGES["int64"]
    assert randint_bounds(spec(distribution="randint", dtype="int64", low=first, high=last + 1)) == (first, 2**64)


def test_the_suite_parser_accepts_every_dtype_range_end_to_end(tmp_path) -> None:
    for dtype, (first, last) in INT_RANGES.items():
        text = MINIMAL_SUITE.replace(
            "{shape: [1024]}",
            f"{{shape: [1024], dtype: {dtype}, distribution: randint, low: {first}, high: {last + 1}}}",
        )
        suite = load_suite(write(tmp_path / f"{dtype}.yaml", text))
        got = suite.cases[0].inputs[0]
        assert (int(got.low), int(got.high)) == (first, last + 1)
        assert randint_bounds(replace(got)) == (first, last + 1 - first)
