"""Adjoints and tangents of tuples and of rows of tensors: literal, extract, insert."""

from __future__ import annotations

import numpy as np
import pytest

from dlvm.ad.testing import check_gradient, check_tangent

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")

RNG = np.random.default_rng(11)

AGGREGATES = """
module "aggregates"
stage raw

// rows of a tensor read and written at a run-time index, and values packed in tuples
func @f: (<4 x 3 x f64>, <3 x f64>, i64) -> (<4 x 3 x f64>, f64) {
'entry(%m: <4 x 3 x f64>, %v: <3 x f64>, %i: i64):
    %row = extract %i: i64 from %m: <4 x 3 x f64>
    %prod = multiply %row: <3 x f64>, %v: <3 x f64>
    %s = sin %prod: <3 x f64>
    %m2 = insert %s: <3 x f64> to %m: <4 x 3 x f64> at 1
    %m3 = insert %v: <3 x f64> to %m2: <4 x 3 x f64> at %i: i64
    %pair = literal (%m3: <4 x 3 x f64>, %s: <3 x f64>): (<4 x 3 x f64>, <3 x f64>)
    %back = extract 1 from %pair: (<4 x 3 x f64>, <3 x f64>)
    %e = exp %back: <3 x f64>
    %total = reduce %e: <3 x f64> by add init 0.0: f64
    %out = literal (%m3: <4 x 3 x f64>, %total: f64): (<4 x 3 x f64>, f64)
    return %out: (<4 x 3 x f64>, f64)
}

[gradient @f from 0 wrt 0, 1 seedable]
func @df0: (<4 x 3 x f64>, <3 x f64>, i64, <4 x 3 x f64>) -> (<4 x 3 x f64>, <3 x f64>)

[gradient @f from 1 wrt 0, 1 keeping 0, 1]
func @df1: (<4 x 3 x f64>, <3 x f64>, i64) -> (<4 x 3 x f64>, <3 x f64>, <4 x 3 x f64>, f64)

[tangent @f from 0 wrt 0, 1]
func @tf0: (<4 x 3 x f64>, <3 x f64>, i64, <4 x 3 x f64>, <3 x f64>) -> (<4 x 3 x f64>)

[tangent @f from 1 wrt 0, 1 keeping 1]
func @tf1: (<4 x 3 x f64>, <3 x f64>, i64, <4 x 3 x f64>, <3 x f64>) -> (f64, f64)
"""


@pytest.mark.parametrize("i", [0, 1, 3])
def test_tuples_and_rows_at_a_run_time_index(i: int) -> None:
    args = [RNG.standard_normal((4, 3)), RNG.standard_normal(3), np.int64(i)]
    check_gradient(AGGREGATES, "f", "df0", args)
    check_gradient(AGGREGATES, "f", "df1", args)
    tangents = [RNG.standard_normal((4, 3)), RNG.standard_normal(3)]
    check_tangent(AGGREGATES, "f", "tf0", args, tangents)
    check_tangent(AGGREGATES, "f", "tf1", args, tangents)
