# The seed's NNKit demo: the IR NNKit writes for `f` and for its gradient `df`, in both
# forms, is the listing of the DLVM web site (up to the module's name).
# RUN: %python %s | filecheck %s

import numpy as np

from dlvm import nnkit as nn
from dlvm.nnkit import Float1D, Float2D

f = nn.lambda_(lambda x, w, b: x @ w + b.rank_lifted(), (Float2D, Float2D, Float1D), name="f")
df = nn.gradient(f, wrt=(1, 2), seedable=True, name="df")

# CHECK-LABEL: // f, dimension-erased
# CHECK:      func @f: (<_ x _ x f32>, <_ x _ x f32>, <_ x f32>) -> <_ x _ x f32> {
# CHECK-NEXT: 'entry(%x: <_ x _ x f32>, %w: <_ x _ x f32>, %b: <_ x f32>):
# CHECK-NEXT:     %0.0 = dot %x: <_ x _ x f32>, %w: <_ x _ x f32>
# CHECK-NEXT:     %0.1 = padShape %b: <_ x f32> at 0
# CHECK-NEXT:     %0.2 = add %0.0: <_ x _ x f32>, %0.1: <1 x _ x f32>
# CHECK-NEXT:     return %0.2: <_ x _ x f32>
print("// f, dimension-erased")
print(f.ir(dynamic=True))

# CHECK-LABEL: // f, shape-specialized
# CHECK:      func @f: (<1 x 784 x f32>, <784 x 10 x f32>, <10 x f32>) -> <1 x 10 x f32> {
# CHECK:          %0.2 = add %0.0: <1 x 10 x f32>, %0.1: <1 x 10 x f32>
x = np.zeros((1, 784), np.float32)
w = np.zeros((784, 10), np.float32)
b = np.zeros(10, np.float32)
print("// f, shape-specialized")
print(f.ir(x, w, b))

# CHECK-LABEL: // df, as declared
# CHECK:      [gradient @f wrt 1, 2 seedable]
# CHECK-NEXT: func @df: (<_ x _ x f32>, <_ x _ x f32>, <_ x f32>, <_ x _ x f32>) -> (<_ x _ x f32>, <_ x f32>)
print("// df, as declared")
print(df.ir(dynamic=True))

# CHECK-LABEL: // df, shape-specialized, after differentiation,O2
# CHECK:      func @df: (<1 x 784 x f32>, <784 x 10 x f32>, <10 x f32>, <1 x 10 x f32>) -> (<784 x 10 x f32>, <10 x f32>) {
# CHECK-NEXT: 'entry(%x: <1 x 784 x f32>, %w: <784 x 10 x f32>, %b: <10 x f32>, %seed: <1 x 10 x f32>):
# CHECK-NEXT:     %0.0 = squeezeShape %seed: <1 x 10 x f32> at 0
# CHECK-NEXT:     %0.1 = transpose %x: <1 x 784 x f32>
# CHECK-NEXT:     %0.2 = dot %0.1: <784 x 1 x f32>, %seed: <1 x 10 x f32>
# CHECK-NEXT:     return (%0.2: <784 x 10 x f32>, %0.0: <10 x f32>)
print("// df, shape-specialized, after differentiation,O2")
print(df.ir(x, w, b, np.zeros((1, 10), np.float32), optimize=True))

# Dimension-erased, the bias adjoint is the seed summed over the rows; the optimized IR
# keeps an `unbroadcast` (a run-time size 1 could broadcast), where the site's listing
# writes `reduce %seed … along 0`.
# CHECK-LABEL: // df, dimension-erased, after differentiation,O2
# CHECK:      func @df: (<_ x _ x f32>, <_ x _ x f32>, <_ x f32>, <_ x _ x f32>) -> (<_ x _ x f32>, <_ x f32>) {
# CHECK:          unbroadcast %seed: <_ x _ x f32> like %0.1: <1 x _ x f32>
# CHECK:          transpose %x: <_ x _ x f32>
print("// df, dimension-erased, after differentiation,O2")
print(df.ir(dynamic=True, optimize=True))
