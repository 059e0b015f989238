"""Every target stops where the interpreter stops, at the same instruction, and computes
where it computes: a table of the run-time errors of DLVM's instructions (shapes that do not
match or broadcast, indices out of range, division by zero, negative counts, empty inputs,
dynamic sizes that do not fit, memory and stacks misused), each beside the edge case that is
not an error.

The interpreter's outcome is the specification (`docs/ir-reference.md`); the table states it
and checks it. `llvm-cpu` and the GPU target's launch plans emulated on the host
(`nvptx{device=host}`) must then agree, case by case. Both run without the O3 pipeline,
which may remove an unused instruction that would have failed, and `llvm-cpu` at LLVM's
`opt_level` 0 (code generation is what is tested, and it is the costly part) with a build
per argument shapes, as by default: specialization turns `_` sizes into constants that the
type rules never compared. Resource limits (a count of 2^62 cells) are not in the table:
the interpreter makes cells as they are written, native code at the allocation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import check_same, target_and_options

F32, I8, I32, I64 = np.float32, np.int8, np.int32, np.int64


def z(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.float32)


def ints(*xs: int, dtype: Any = np.int32) -> np.ndarray:
    return np.array(xs, dtype)


@dataclass(frozen=True)
class Case:
    name: str
    signature: str  # "(<_ x f32>, i64) -> f32": arguments are %a0, %a1, …
    body: str  # lines; `;` separates them
    args: tuple[Any, ...]
    error: str | None  # what the interpreter's message says (a regex), or None: it computes


CASES = [
    # ---- element-wise: shapes that do not broadcast, integer division and power
    Case("add_sizes", "(<_ x f32>, <_ x f32>) -> <_ x f32>",
         "%r = add %a0: <_ x f32>, %a1: <_ x f32>", (z(3), z(4)), "cannot be broadcast"),
    Case("add_to_static", "(<_ x f32>, <4 x f32>) -> <4 x f32>",
         "%r = add %a0: <_ x f32>, %a1: <4 x f32>", (z(3), z(4)), "cannot be broadcast"),
    Case("add_one_to_static", "(<_ x f32>, <4 x f32>) -> <4 x f32>",
         "%r = add %a0: <_ x f32>, %a1: <4 x f32>", (z(1), z(4)), None),
    Case("add_empty_to_static", "(<_ x f32>, <4 x f32>) -> <4 x f32>",
         "%r = add %a0: <_ x f32>, %a1: <4 x f32>", (z(0), z(4)), "cannot be broadcast"),
    Case("multiply_empty", "(<_ x f32>, <_ x f32>) -> <_ x f32>",
         "%r = multiply %a0: <_ x f32>, %a1: <_ x f32>", (z(0), z(1)), None),
    Case("select_mask", "(<_ x f32>, <_ x f32>, <_ x bool>) -> <_ x f32>",
         "%r = select %a0: <_ x f32>, %a1: <_ x f32> by %a2: <_ x bool>",
         (z(3), z(3), np.zeros(2, bool)), "cannot be broadcast"),
    Case("compare_columns", "(<_ x 2 x f32>, <_ x _ x f32>) -> <_ x 2 x bool>",
         "%r = lessThan %a0: <_ x 2 x f32>, %a1: <_ x _ x f32>", (z(3, 2), z(3, 3)),
         "cannot be broadcast"),
    Case("divide_by_zero", "(<_ x i32>, <_ x i32>) -> <_ x i32>",
         "%r = divide %a0: <_ x i32>, %a1: <_ x i32>", (ints(1, 2), ints(1, 0)),
         "integer division by zero"),
    Case("divide_nothing_by_zero", "(<_ x i32>, i32) -> <_ x i32>",
         "%r = divide %a0: <_ x i32>, %a1: i32", (ints(), I32(0)), None),
    Case("modulo_nothing_by_zero", "(<_ x 3 x i32>, <1 x 3 x i32>) -> <_ x 3 x i32>",
         "%r = modulo %a0: <_ x 3 x i32>, %a1: <1 x 3 x i32>",
         (np.zeros((0, 3), np.int32), np.array([[1, 0, 2]], np.int32)), None),
    Case("divide_min_by_minus_one", "(<_ x i32>, <_ x i32>) -> <_ x i32>",
         "%r = divide %a0: <_ x i32>, %a1: <_ x i32>", (ints(-2**31), ints(-1)), None),
    Case("truncate_divide_min", "(i64, i64) -> i64", "%r = truncateDivide %a0: i64, %a1: i64",
         (I64(-2**63), I64(-1)), None),
    Case("floor_divide_min", "(i64, i64) -> i64", "%r = floorDivide %a0: i64, %a1: i64",
         (I64(-2**63), I64(-1)), None),
    Case("modulo_min", "(i8, i8) -> i8", "%r = modulo %a0: i8, %a1: i8", (I8(-128), I8(-1)),
         None),
    Case("floor_divide_by_zero", "(i8, i8) -> i8", "%r = floorDivide %a0: i8, %a1: i8",
         (I8(3), I8(0)), "integer division by zero"),
    Case("modulo_by_zero", "(i16, i16) -> i16", "%r = modulo %a0: i16, %a1: i16",
         (np.int16(3), np.int16(0)), "integer modulo by zero"),
    Case("power_negative", "(<2 x i8>, i8) -> <2 x i8>", "%r = power %a0: <2 x i8>, %a1: i8",
         (ints(2, 3, dtype=I8), I8(-2)), "negative exponent"),
    Case("power_of_nothing", "(<_ x i32>, i32) -> <_ x i32>",
         "%r = power %a0: <_ x i32>, %a1: i32", (ints(), I32(-1)), None),
    # ---- indices out of range
    Case("extract_past_end", "(<_ x f32>, i64) -> f32", "%r = extract %a1: i64 from %a0: <_ x f32>",
         (z(3), I64(3)), "index 3 out of bounds for size 3"),
    Case("extract_negative", "(<3 x f32>, i32) -> f32",
         "%r = extract %a1: i32 from %a0: <3 x f32>", (z(3), I32(-1)), "index -1 out of bounds"),
    Case("extract_from_empty", "(<_ x 2 x f32>, i64) -> <2 x f32>",
         "%r = extract %a1: i64 from %a0: <_ x 2 x f32>", (z(0, 2), I64(0)),
         "index 0 out of bounds for size 0"),
    Case("extract_i8_index", "(<_ x f32>, i8) -> f32",
         "%r = extract %a1: i8 from %a0: <_ x f32>", (z(300), I8(-1)), "index -1 out of bounds"),
    Case("extract_constant_past_dynamic", "(<_ x f32>) -> f32", "%r = extract 5 from %a0: <_ x f32>",
         (z(3),), "index 5 out of bounds for size 3"),
    Case("extract_second_key", "(<3 x _ x f32>, i64) -> f32",
         "%r = extract 1, %a1: i64 from %a0: <3 x _ x f32>", (z(3, 2), I64(2)),
         "index 2 out of bounds for size 2"),
    Case("insert_past_end", "(<_ x f32>, i64, f32) -> <_ x f32>",
         "%r = insert %a2: f32 to %a0: <_ x f32> at %a1: i64", (z(3), I64(3), F32(1)),
         "index 3 out of bounds for size 3"),
    Case("insert_longer_row", "(<_ x _ x f32>, i64, <_ x f32>) -> <_ x _ x f32>",
         "%r = insert %a2: <_ x f32> to %a0: <_ x _ x f32> at %a1: i64",
         (z(3, 2), I64(0), z(3)), "cannot replace"),
    Case("insert_shorter_row", "(<_ x _ x f32>, i64, <_ x f32>) -> <_ x _ x f32>",
         "%r = insert %a2: <_ x f32> to %a0: <_ x _ x f32> at %a1: i64",
         (z(3, 2), I64(2), z(1)), "cannot replace"),
    Case("array_extract_past_end", "([3 x f32], i64) -> f32",
         "%r = extract %a1: i64 from %a0: [3 x f32]", ((F32(1), F32(2), F32(3)), I64(3)),
         "index 3 out of bounds for size 3"),
    Case("array_insert_negative", "([3 x f32], i64) -> [3 x f32]",
         "%r = insert 1: f32 to %a0: [3 x f32] at %a1: i64", ((F32(1), F32(2), F32(3)), I64(-1)),
         "index -1 out of bounds"),
    Case("slice_past_dynamic_end", "(<_ x f32>) -> <3 x f32>",
         "%r = slice %a0: <_ x f32> from 1 upto 3", (z(3),), "out of range for dimension 0"),
    Case("slice_of_empty", "(<_ x f32>) -> <1 x f32>", "%r = slice %a0: <_ x f32> from 0 upto 0",
         (z(0),), "out of range for dimension 0"),
    Case("literal_rows_differ", "(<_ x f32>, <_ x f32>) -> <2 x _ x f32>",
         "%r = literal <%a0: <_ x f32>, %a1: <_ x f32>>: <2 x _ x f32>", (z(2), z(3)),
         "tensor literal element 1"),
    # ---- shape casts: sizes that do not fit
    Case("squeeze_not_one", "(<_ x 3 x f32>) -> <3 x f32>",
         "%r = squeezeShape %a0: <_ x 3 x f32> at 0", (z(2, 3),), "dimension 0 has size 2"),
    Case("squeeze_empty", "(<_ x 3 x f32>) -> <3 x f32>",
         "%r = squeezeShape %a0: <_ x 3 x f32> at 0", (z(0, 3),), "dimension 0 has size 0"),
    Case("shape_cast_count", "(<_ x f32>) -> <2 x 2 x f32>", "%r = shapeCast %a0: <_ x f32> to 2 x 2",
         (z(5),), "cannot reshape"),
    Case("shape_cast_not_divisible", "(<_ x f32>) -> <_ x 3 x f32>",
         "%r = shapeCast %a0: <_ x f32> to _ x 3", (z(5),), "cannot reshape"),
    Case("shape_cast_empty_beside_zero", "(<_ x f32>) -> <_ x 0 x f32>",
         "%r = shapeCast %a0: <_ x f32> to _ x 0", (z(0),), "cannot reshape"),
    Case("shape_cast_beside_zero", "(<_ x f32>) -> <_ x 0 x f32>",
         "%r = shapeCast %a0: <_ x f32> to _ x 0", (z(3),), "cannot reshape"),
    Case("shape_cast_empty_to_zero_rows", "(<_ x 0 x f32>) -> <2 x _ x f32>",
         "%r = shapeCast %a0: <_ x 0 x f32> to 2 x _", (z(4, 0),), None),
    Case("shape_cast_empty", "(<_ x 3 x f32>) -> <_ x f32>", "%r = shapeCast %a0: <_ x 3 x f32> to _",
         (z(0, 3),), None),
    Case("shape_cast_to_scalar", "(<_ x f32>) -> f32", "%r = shapeCast %a0: <_ x f32> to scalar",
         (z(2),), "cannot reshape"),
    Case("shape_cast_empty_to_scalar", "(<_ x f32>) -> f32",
         "%r = shapeCast %a0: <_ x f32> to scalar", (z(0),), "cannot reshape"),
    Case("bit_cast_count", "(<_ x f32>) -> <2 x f64>", "%r = bitCast %a0: <_ x f32> to <2 x f64>",
         (z(3),), "cannot reinterpret"),
    Case("bit_cast_partial_element", "(<_ x f32>) -> <_ x f64>",
         "%r = bitCast %a0: <_ x f32> to <_ x f64>", (z(3),), "cannot reinterpret"),
    Case("bit_cast_bytes", "(<_ x i8>) -> <_ x i32>", "%r = bitCast %a0: <_ x i8> to <_ x i32>",
         (ints(1, 2, 3, 4, 5, 6, dtype=I8),), "cannot reinterpret"),
    Case("bit_cast_rows", "(<2 x 3 x f32>) -> <3 x f64>",
         "%r = bitCast %a0: <2 x 3 x f32> to <3 x f64>", (z(2, 3),), None),
    Case("bit_cast_scalar", "(f64) -> <2 x f32>", "%r = bitCast %a0: f64 to <2 x f32>",
         (np.float64(1),), None),
    Case("bit_cast_two_dynamic", "(<_ x f32>) -> <_ x _ x f64>",
         "%r = bitCast %a0: <_ x f32> to <_ x _ x f64>", (z(4),), "cannot reinterpret"),
    # ---- layout and linear algebra
    Case("concatenate_columns", "(<_ x 2 x f32>, <_ x _ x f32>) -> <_ x 2 x f32>",
         "%r = concatenate %a0: <_ x 2 x f32>, %a1: <_ x _ x f32> along 0", (z(1, 2), z(1, 3)),
         "cannot concatenate"),
    Case("concatenate_rows", "(<2 x _ x f32>, <_ x 3 x f32>) -> <2 x _ x f32>",
         "%r = concatenate %a0: <2 x _ x f32>, %a1: <_ x 3 x f32> along 1", (z(2, 1), z(3, 3)),
         "cannot concatenate"),
    Case("dot_inner", "(<_ x _ x f32>, <_ x _ x f32>) -> <_ x _ x f32>",
         "%r = dot %a0: <_ x _ x f32>, %a1: <_ x _ x f32>", (z(2, 3), z(4, 2)), "dot: "),
    Case("dot_vectors", "(<_ x f32>, <_ x f32>) -> f32", "%r = dot %a0: <_ x f32>, %a1: <_ x f32>",
         (z(2), z(3)), "dot: "),
    Case("dot_batch", "(<_ x 2 x 3 x f32>, <_ x 3 x 2 x f32>) -> <_ x 2 x 2 x f32>",
         "%r = dot %a0: <_ x 2 x 3 x f32>, %a1: <_ x 3 x 2 x f32>", (z(2, 2, 3), z(3, 3, 2)),
         "dot: "),
    Case("dot_integers", "(<_ x _ x i32>, <_ x _ x i32>) -> <_ x _ x i32>",
         "%r = dot %a0: <_ x _ x i32>, %a1: <_ x _ x i32>",
         (np.zeros((2, 3), np.int32), np.zeros((2, 2), np.int32)), "dot: "),
    Case("dot_empty_inner", "(<_ x _ x f32>, <_ x _ x f32>) -> <_ x _ x f32>",
         "%r = dot %a0: <_ x _ x f32>, %a1: <_ x _ x f32>", (z(2, 0), z(0, 2)), None),
    Case("convolve_channels", "(<1 x _ x 4 x f32>, <2 x _ x 2 x f32>) -> <1 x 2 x 3 x f32>",
         "%r = convolve %a0: <1 x _ x 4 x f32> kernel %a1: <2 x _ x 2 x f32>",
         (z(1, 3, 4), z(2, 2, 2)), "input channels per group"),
    Case("convolve_groups_output", "(<1 x _ x 4 x f32>, <_ x 1 x 2 x f32>) -> <1 x _ x 3 x f32>",
         "%r = convolve %a0: <1 x _ x 4 x f32> kernel %a1: <_ x 1 x 2 x f32> groups 2",
         (z(1, 2, 4), z(3, 1, 2)), "groups 2 must divide the 3 output channels"),
    Case("convolve_groups_input", "(<1 x _ x 4 x f32>, <2 x 1 x 2 x f32>) -> <1 x 2 x 3 x f32>",
         "%r = convolve %a0: <1 x _ x 4 x f32> kernel %a1: <2 x 1 x 2 x f32> groups 2",
         (z(1, 3, 4), z(2, 1, 2)), "groups 2 must divide the 3 input channels"),
    Case("convolve_window_past_input", "(<1 x 1 x _ x f32>, <1 x 1 x 3 x f32>) -> <1 x 1 x _ x f32>",
         "%r = convolve %a0: <1 x 1 x _ x f32> kernel %a1: <1 x 1 x 3 x f32>",
         (z(1, 1, 2), z(1, 1, 3)), None),
    Case("convolve_empty_padded", "(<1 x 1 x _ x f32>, <1 x 1 x 1 x f32>) -> <1 x 1 x _ x f32>",
         "%r = convolve %a0: <1 x 1 x _ x f32> kernel %a1: <1 x 1 x 1 x f32> padding (1, 1)",
         (z(1, 1, 0), z(1, 1, 1)), None),
    Case("unbroadcast_sizes", "(<_ x _ x f32>, <_ x _ x f32>) -> <_ x _ x f32>",
         "%r = unbroadcast %a0: <_ x _ x f32> like %a1: <_ x _ x f32>", (z(2, 3), z(2, 2)),
         "does not broadcast"),
    Case("reduce_window_past_input", "(<_ x f32>) -> <_ x f32>",
         "%r = reduceWindow %a0: <_ x f32> by add init 0: f32 dims 3 strides 1 padding none",
         (z(2),), None),
    Case("reduce_window_half_of_empty", "(<_ x _ x f32>) -> <_ x _ x f32>",
         "%r = reduceWindow %a0: <_ x _ x f32> by max init -inf: f32 dims 2, 2 strides 2, 2 "
         "padding half", (z(0, 3),), None),
    Case("reduce_window_full_of_empty", "(<_ x f32>) -> <_ x f32>",
         "%r = reduceWindow %a0: <_ x f32> by add init 0: f32 dims 1 strides 2 padding full",
         (z(0),), None),
    Case("reduce_empty", "(<_ x f32>) -> f32", "%r = reduce %a0: <_ x f32> by max init -inf: f32",
         (z(0),), None),
    Case("reduce_empty_by_function", "(<_ x f32>) -> f32",
         "%r = reduce %a0: <_ x f32> by @plus: (f32, f32) -> f32 init 2: f32", (z(0),), None),
    Case("scan_empty", "(<_ x f32>) -> <_ x f32>", "%r = scan %a0: <_ x f32> by add along 0",
         (z(0),), None),
    Case("builtin_min_sizes", "(<_ x f32>, <_ x f32>) -> <_ x f32>",
         '%r = builtin "min"(%a0: <_ x f32>, %a1: <_ x f32>) -> <_ x f32>', (z(2), z(3)),
         "cannot be broadcast"),
    Case("softmax_of_empty_rows", "(<_ x 0 x f32>) -> <_ x 0 x f32>",
         '%r = builtin "softmax"(%a0: <_ x 0 x f32>) -> <_ x 0 x f32>', (z(2, 0),), None),
    # ---- random
    Case("random_empty_range", "(f32) -> <2 x f32>", "%r = random 2 from %a0: f32 upto 0: f32",
         (F32(1),), "lower < upper"),
    Case("random_integer_range", "(i32) -> <2 x i32>", "%r = random 2 from 5: i32 upto %a0: i32",
         (I32(5),), "lower < upper"),
    Case("random_nan_bound", "(f32) -> <2 x f32>", "%r = random 2 from 0: f32 upto %a0: f32",
         (F32(np.nan),), "lower < upper"),
    Case("random_infinite_bound", "(f32) -> <2 x f32>", "%r = random 2 from 0: f32 upto %a0: f32",
         (F32(np.inf),), "random"),
    # ---- calls, control flow
    Case("argument_shape", "(<_ x f32>) -> <3 x f32>", "%r = apply @id3(%a0: <_ x f32>) -> <3 x f32>",
         (z(2),), "argument 0 of '@id3' has shape <2>"),
    Case("block_argument_shape", "(<_ x f32>) -> <3 x f32>",
         "branch 'out(%a0: <_ x f32>);'out(%y: <3 x f32>):;return %y: <3 x f32>", (z(2),),
         "argument 0 of block 'out of '@block_argument_shape' has shape <2>"),
    Case("result_shape", "(<_ x f32>) -> <3 x f32>", "return %a0: <_ x f32>", (z(2),),
         "the result of '@result_shape'"),
    Case("null_call", "(f32) -> f32",
         "%g = literal null: (f32) -> f32; %r = apply %g(%a0: f32) -> f32", (F32(1),),
         "call of a null function"),
    Case("extern_call", "(f32) -> f32", "%r = apply @ext(%a0: f32) -> f32", (F32(1),),
         "external declaration"),
    Case("undefined_enum", "(f32) -> f32",
         "%e = literal undefined: $E; branchEnum %e: $E case ?a 'x case ?b 'y;'x(%u: f32):;"
         "return %u: f32;'y():;return %a0: f32", (F32(1),), "undefined enum value"),
    Case("unlisted_case", "(f32) -> f32",
         "%e = literal ?b: $E; branchEnum %e: $E case ?a 'x;'x(%u: f32):;return %u: f32",
         (F32(1),), "no block for case '\\?b'"),
    Case("trap", "(f32) -> f32", "trap", (F32(1),), "trap"),
    # ---- memory
    Case("allocate_negative", "(i64) -> f32", "%p = allocateHeap f32 count %a0: i64; %r = literal 1: f32",
         (I64(-1),), "negative"),
    Case("load_from_zero_cells", "(i64) -> f32",
         "%p = allocateHeap f32 count %a0: i64; %r = load %p: *f32", (I64(0),),
         "pointer index 0 out of bounds"),
    Case("element_pointer_past_end", "(i64) -> f32",
         "%p = allocateHeap <3 x f32> count 1: i64; "
         "%e = elementPointer %p: *<3 x f32> at %a0: i64; %r = literal 1: f32", (I64(3),),
         "index 3 out of bounds for size 3"),
    Case("copy_negative", "(i64) -> f32",
         "%p = allocateHeap f32 count 2: i64; %q = allocateHeap f32 count 2: i64; "
         "copy from %p: *f32 to %q: *f32 count %a0: i64; %r = literal 1: f32", (I64(-1),),
         "negative count -1"),
    Case("copy_past_source", "(i64) -> f32",
         "%p = allocateHeap f32 count 2: i64; %q = allocateHeap f32 count 5: i64; "
         "copy from %p: *f32 to %q: *f32 count %a0: i64; %r = literal 1: f32", (I64(3),),
         "reads past the end of its source: pointer index 2 out of bounds"),
    Case("copy_past_destination", "(i64) -> f32",
         "%p = allocateHeap f32 count 5: i64; %q = allocateHeap f32 count 2: i64; "
         "copy from %p: *f32 to %q: *f32 count %a0: i64; %r = literal 1: f32", (I64(3),),
         "writes past the end of its destination: pointer index 2 out of bounds"),
    Case("copy_past_a_row", "(i64) -> f32",
         "%p = allocateHeap <2 x 3 x f32> count 1: i64; %q = allocateHeap f32 count 9: i64; "
         "%e = elementPointer %p: *<2 x 3 x f32> at 0, 1; "
         "copy from %e: *f32 to %q: *f32 count %a0: i64; %r = literal 1: f32", (I64(3),),
         "reads past the end of its source: index 3 out of bounds for size 3"),
    Case("copy_within_a_row", "(i64) -> f32",
         "%p = allocateHeap <2 x 3 x f32> count 1: i64; %q = allocateHeap f32 count 9: i64; "
         "%e = elementPointer %p: *<2 x 3 x f32> at 1, 1; "
         "copy from %e: *f32 to %q: *f32 count %a0: i64; %r = literal 1: f32", (I64(2),), None),
    Case("copy_two_boxes", "(i64) -> f32",
         "%p = allocateBox f32; %q = allocateBox f32; "
         "copy from %p: box{f32} to %q: box{f32} count %a0: i64; %r = literal 1: f32", (I64(2),),
         "pointer index 1 out of bounds"),
    Case("double_deallocate", "(f32) -> f32",
         "%p = allocateHeap f32 count 1: i64; deallocate %p: *f32; deallocate %p: *f32; "
         "%r = literal 1: f32", (F32(1),), "double deallocation"),
    Case("store_deallocated", "(f32) -> f32",
         "%p = allocateHeap f32 count 1: i64; deallocate %p: *f32; store %a0: f32 to %p: *f32; "
         "%r = literal 1: f32", (F32(1),), "use of deallocated memory"),
    Case("deallocate_stack_memory", "(f32) -> f32",
         "%p = allocateStack f32 count 1; deallocate %p: *f32; %r = literal 1: f32", (F32(1),),
         None),
    Case("load_null", "(f32) -> f32", "%p = literal null: *f32; %r = load %p: *f32", (F32(1),),
         "is null"),
    Case("load_undefined_pointer", "(f32) -> f32",
         "%p = literal undefined: *f32; %r = load %p: *f32", (F32(1),), "is null"),
    Case("project_freed_box", "(f32) -> f32",
         "%b = allocateBox f32; release %b: box{f32}; %p = projectBox %b: box{f32}; "
         "%r = load %p: *f32", (F32(1),), "use of a freed box"),
    Case("release_box_twice", "(f32) -> f32",
         "%b = allocateBox f32; release %b: box{f32}; release %b: box{f32}; %r = literal 1: f32",
         (F32(1),), "use of a freed box"),
    # ---- stacks
    Case("pop_empty", "(f32) -> f32",
         "%s = createStack; push %a0: f32 to %s: stack; %x = pop f32 from %s: stack; "
         "%r = pop f32 from %s: stack", (F32(1),), "pop from an empty stack"),
    Case("pop_other_type", "(f32) -> i64",
         "%s = createStack; push %a0: f32 to %s: stack; %r = pop i64 from %s: stack", (F32(1),),
         "pop of 'i64' from a stack whose top is 'f32'"),
    Case("pop_other_shape", "(<_ x f32>) -> <3 x f32>",
         "%s = createStack; push %a0: <_ x f32> to %s: stack; %r = pop <3 x f32> from %s: stack",
         (z(2),), "has shape <2>"),
    Case("pop_destroyed", "(f32) -> f32",
         "%s = createStack; push %a0: f32 to %s: stack; destroyStack %s: stack; "
         "%r = pop f32 from %s: stack", (F32(1),), "pop from an empty stack"),
    Case("push_after_destroy", "(f32) -> f32",
         "%s = createStack; destroyStack %s: stack; push %a0: f32 to %s: stack; "
         "%r = pop f32 from %s: stack", (F32(1),), None),
    Case("pop_undefined_stack", "(f32) -> f32",
         "%s = literal undefined: stack; %r = pop f32 from %s: stack", (F32(1),),
         "undefined stack"),
    Case("push_undefined_stack", "(f32) -> f32",
         "%s = literal undefined: stack; push %a0: f32 to %s: stack; %r = literal 1: f32",
         (F32(1),), "undefined stack"),
    Case("destroy_undefined_stack", "(f32) -> f32",
         "%s = literal undefined: stack; destroyStack %s: stack; %r = literal 1: f32", (F32(1),),
         "undefined stack"),
]

PRELUDE = """
enum $E {
    ?a(f32)
    ?b
}

func @id3: (<3 x f32>) -> <3 x f32> {
'entry(%x: <3 x f32>):
    return %x: <3 x f32>
}

func @plus: (f32, f32) -> f32 {
'entry(%x: f32, %y: f32):
    %s = add %x: f32, %y: f32
    return %s: f32
}

[extern]
func @ext: (f32) -> f32
"""


def function_text(case: Case) -> str:
    """`@name`: the body's lines, then `return %r` (or of the first argument, without an
    `%r`), unless the body returns."""
    arguments, result = case.signature.rsplit(" -> ", 1)
    params = split_top_level(arguments[1:-1])
    lines = [line.strip() for line in case.body.split(";") if line.strip()]
    returned = "%r" if any(line.startswith("%r =") for line in lines) else "%a0"
    if not any(line.startswith("return") for line in lines):
        lines.append(f"return {returned}: {result}")
    head = ", ".join(f"%a{k}: {t}" for k, t in enumerate(params))
    body = "\n".join(line if line.startswith("'") else f"    {line}" for line in lines)
    return f"func @{case.name}: {case.signature} {{\n'entry({head}):\n{body}\n}}\n"


def split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "<([{"
        depth -= ch in ">)]}"
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    return [*parts, current.strip()] if current.strip() else parts


SOURCE = PRELUDE + "\n".join(function_text(c) for c in CASES)
TARGETS = {"llvm-cpu": {"passes": "", "opt_level": 0},
           "nvptx{device=host}": {"passes": ""}}


@pytest.fixture(scope="module")
def module() -> ir.Module:
    m = ir.parse(SOURCE, "errors.dl")
    ir.verify(m)
    return m


@pytest.fixture(scope="module")
def oracle(module: ir.Module) -> ir.Executable:
    return ir.compile(module, "interp")


@pytest.fixture(scope="module", params=list(TARGETS))
def target(request: pytest.FixtureRequest, module: ir.Module) -> ir.Executable:
    name, options = target_and_options(request.param)
    if not ir.registry().has("target", name):
        pytest.skip(f"target '{name}' is not installed")
    return ir.compile(module, name, **options, **TARGETS[request.param])


def test_every_case_has_its_own_name() -> None:
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_interpreter_decides_each_case(case: Case, oracle: ir.Executable) -> None:
    if case.error is None:
        oracle.call(case.name, *case.args)
        return
    with pytest.raises(ir.ExecutionError) as e:
        oracle.call(case.name, *case.args)
    assert re.search(case.error, str(e.value)), str(e.value)
    assert str(e.value).startswith("errors.dl:") or "'@" in str(e.value), str(e.value)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_target_agrees_with_the_interpreter(case: Case, target: ir.Executable,
                                                 oracle: ir.Executable) -> None:
    fn = oracle.module.function(case.name)
    check_same(fn, list(case.args), target, oracle, same_place=True)


def test_a_target_carries_on_after_each_error(target: ir.Executable) -> None:
    np.testing.assert_array_equal(target.call("add_sizes", z(2), np.ones(2, F32))[0],
                                  np.ones(2, F32))


class Failing:
    """An executable whose every call fails with `message`."""

    def __init__(self, message: str) -> None:
        self.message = message

    def call(self, name: str, *args: Any) -> Any:
        raise ir.ExecutionError(self.message)


@pytest.mark.parametrize(("oracle_says", "target_says", "agree"), [
    ("f.dl:3:10: 'pop': pop from an empty stack", "f.dl:3:10: 'pop': other words", True),
    ("f.dl:3:10: 'pop': pop from an empty stack", "f.dl:7:5: 'return': bad shape", False),
    ("f.dl:3:10: 'pop': pop from an empty stack", "the result of '@f' has shape <2>", False),
    ("the result of '@f' has shape <2>", "f.dl:7:5: 'return': the result of '@f'", True),
])
def test_an_error_at_another_instruction_is_a_disagreement(
        oracle_says: str, target_says: str, agree: bool, module: ir.Module) -> None:
    fn = module.function("trap")
    target, oracle = Failing(target_says), Failing(oracle_says)
    if agree:
        check_same(fn, [], target, oracle, same_place=True)  # type: ignore[arg-type]
    else:
        with pytest.raises(AssertionError, match="the oracle fails at"):
            check_same(fn, [], target, oracle, same_place=True)  # type: ignore[arg-type]
