"""Typed `Builder` methods, one per built-in instruction.

Generated from the `OpDef` table by `python -m dlvm.ir.builder_gen`; do not edit by hand.
"""

# ruff: noqa: E501

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from .core import Block, BranchTarget, BuiltinRef, Instruction, Value
    from .types import DataType, Type

Operand: TypeAlias = "Value | bool | int | float"
Key: TypeAlias = "int | str | Value"
Target: TypeAlias = "BranchTarget | Block | tuple[Block, Sequence[Value]]"
Combinator: TypeAlias = "str | BuiltinRef | Value"


class InstructionMethods:
    """`b.add(x, y)`, `b.dot(a, w)`, …: positional arguments in syntax order; the result type
    comes from the instruction's type rule."""

    if TYPE_CHECKING:
        def create(self, opcode: str, *args: Any, name: str | None = None,
                   **fields: Any) -> Instruction: ...

    def literal_(self, value: Operand, *, name: str | None = None) -> Instruction:
        '`literal $value:literal_use`: materialize a literal (splat, tensor, tuple, struct, …).'
        return self.create('literal', value=value, name=name)

    def extract(self, value: Operand, keys: Sequence[Key], *, name: str | None = None) -> Instruction:
        '`extract $keys:keys from $value`: the element at a key path (tuple/array index, struct field, tensor row).'
        return self.create('extract', value=value, keys=keys, name=name)

    def insert_(self, element: Operand, destination: Operand, keys: Sequence[Key], *, name: str | None = None) -> Instruction:
        '`insert $element to $destination at $keys:keys`: a copy of the aggregate with the element at a key path replaced.'
        return self.create('insert', element=element, destination=destination, keys=keys, name=name)

    def apply(self, callee: Value, args: Sequence[Operand], result: Type | None = None, *, name: str | None = None) -> Instruction:
        '`apply $callee:callee $args:call_args $result:signature`: call a function (direct or through a function value).'
        return self.create('apply', callee=callee, args=args, result=result, name=name)

    def builtin(self, builtin: str, args: Sequence[Operand], result: Type, *, name: str | None = None) -> Instruction:
        '`builtin $builtin:string $args:call_args $result:signature`: call a registered intrinsic (softmax, min, max, mean, …).'
        return self.create('builtin', builtin=builtin, args=args, result=result, name=name)

    def unbroadcast(self, x: Operand, like: Operand, *, name: str | None = None) -> Instruction:
        '`unbroadcast $x like $like`: sum over the dimensions along which the second operand was broadcast.'
        return self.create('unbroadcast', x=x, like=like, name=name)

    def branch(self, destination: Target, *, name: str | None = None) -> Instruction:
        '`branch $destination:target`: jump to a block, passing its arguments.'
        return self.create('branch', destination=destination, name=name)

    def conditional(self, condition: Operand, then: Target, else_: Target, *, name: str | None = None) -> Instruction:
        '`conditional $condition then $then:target else $else:target`: jump to one of two blocks by a bool condition.'
        return self.create('conditional', condition=condition, then=then, **{'else': else_}, name=name)

    def branchEnum(self, value: Operand, cases: Sequence[tuple[str, Target]], *, name: str | None = None) -> Instruction:
        "`branchEnum $value $cases:enum_cases`: jump by an enum's case, passing its associated values."
        return self.create('branchEnum', value=value, cases=cases, name=name)

    def ret(self, value: Operand | None = None, *, name: str | None = None) -> Instruction:
        '`return [$value]`: return from the function.'
        return self.create('return', value=value, name=name)

    def negate(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`negate $x`: −x.'
        return self.create('negate', x=x, name=name)

    def sign(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`sign $x`: −1, 0 or 1 by the sign of x.'
        return self.create('sign', x=x, name=name)

    def square(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`square $x`: x².'
        return self.create('square', x=x, name=name)

    def sqrt(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`sqrt $x`: √x.'
        return self.create('sqrt', x=x, name=name)

    def rsqrt(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`rsqrt $x`: 1/√x.'
        return self.create('rsqrt', x=x, name=name)

    def exp(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`exp $x`: eˣ.'
        return self.create('exp', x=x, name=name)

    def log(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`log $x`: natural logarithm.'
        return self.create('log', x=x, name=name)

    def sin(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`sin $x`: sine.'
        return self.create('sin', x=x, name=name)

    def cos(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`cos $x`: cosine.'
        return self.create('cos', x=x, name=name)

    def tan(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`tan $x`: tangent.'
        return self.create('tan', x=x, name=name)

    def asin(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`asin $x`: arc sine.'
        return self.create('asin', x=x, name=name)

    def acos(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`acos $x`: arc cosine.'
        return self.create('acos', x=x, name=name)

    def atan(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`atan $x`: arc tangent.'
        return self.create('atan', x=x, name=name)

    def sinh(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`sinh $x`: hyperbolic sine.'
        return self.create('sinh', x=x, name=name)

    def cosh(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`cosh $x`: hyperbolic cosine.'
        return self.create('cosh', x=x, name=name)

    def tanh(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`tanh $x`: hyperbolic tangent.'
        return self.create('tanh', x=x, name=name)

    def round(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`round $x`: nearest integer, halves away from zero.'
        return self.create('round', x=x, name=name)

    def rint(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`rint $x`: nearest integer, halves to even.'
        return self.create('rint', x=x, name=name)

    def ceil(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`ceil $x`: smallest integer ≥ x.'
        return self.create('ceil', x=x, name=name)

    def floor(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`floor $x`: largest integer ≤ x.'
        return self.create('floor', x=x, name=name)

    def lgamma(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`lgamma $x`: log |Γ(x)|.'
        return self.create('lgamma', x=x, name=name)

    def digamma(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`digamma $x`: ψ(x) = d/dx log Γ(x).'
        return self.create('digamma', x=x, name=name)

    def erf(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`erf $x`: error function.'
        return self.create('erf', x=x, name=name)

    def erfc(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`erfc $x`: complementary error function, 1 − erf(x).'
        return self.create('erfc', x=x, name=name)

    def not_(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`not $x`: logical not.'
        return self.create('not', x=x, name=name)

    def bitNot(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`bitNot $x`: every bit of x flipped (−x − 1 for iN).'
        return self.create('bitNot', x=x, name=name)

    def add(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`add $lhs , $rhs`: a + b.'
        return self.create('add', lhs=lhs, rhs=rhs, name=name)

    def subtract(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`subtract $lhs , $rhs`: a − b.'
        return self.create('subtract', lhs=lhs, rhs=rhs, name=name)

    def multiply(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`multiply $lhs , $rhs`: a · b.'
        return self.create('multiply', lhs=lhs, rhs=rhs, name=name)

    def divide(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`divide $lhs , $rhs`: a / b (integers: truncated toward zero).'
        return self.create('divide', lhs=lhs, rhs=rhs, name=name)

    def min(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`min $lhs , $rhs`: the smaller of a and b.'
        return self.create('min', lhs=lhs, rhs=rhs, name=name)

    def max(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`max $lhs , $rhs`: the larger of a and b.'
        return self.create('max', lhs=lhs, rhs=rhs, name=name)

    def truncateDivide(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`truncateDivide $lhs , $rhs`: a / b rounded toward zero.'
        return self.create('truncateDivide', lhs=lhs, rhs=rhs, name=name)

    def floorDivide(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`floorDivide $lhs , $rhs`: a / b rounded toward −∞.'
        return self.create('floorDivide', lhs=lhs, rhs=rhs, name=name)

    def modulo(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`modulo $lhs , $rhs`: remainder of truncated division (sign of a).'
        return self.create('modulo', lhs=lhs, rhs=rhs, name=name)

    def power(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`power $lhs , $rhs`: aᵇ.'
        return self.create('power', lhs=lhs, rhs=rhs, name=name)

    def and_(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`and $lhs , $rhs`: logical and.'
        return self.create('and', lhs=lhs, rhs=rhs, name=name)

    def or_(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`or $lhs , $rhs`: logical or.'
        return self.create('or', lhs=lhs, rhs=rhs, name=name)

    def bitAnd(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`bitAnd $lhs , $rhs`: bitwise and.'
        return self.create('bitAnd', lhs=lhs, rhs=rhs, name=name)

    def bitOr(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`bitOr $lhs , $rhs`: bitwise or.'
        return self.create('bitOr', lhs=lhs, rhs=rhs, name=name)

    def bitXor(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`bitXor $lhs , $rhs`: bitwise exclusive or.'
        return self.create('bitXor', lhs=lhs, rhs=rhs, name=name)

    def shiftLeft(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`shiftLeft $lhs , $rhs`: a · 2ᵇ, wrapping (bits shifted out are lost).'
        return self.create('shiftLeft', lhs=lhs, rhs=rhs, name=name)

    def shiftRight(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`shiftRight $lhs , $rhs`: a shifted right b bits: arithmetic for iN (⌊a / 2ᵇ⌋), logical for uN.'
        return self.create('shiftRight', lhs=lhs, rhs=rhs, name=name)

    def lessThan(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`lessThan $lhs , $rhs`: a < b.'
        return self.create('lessThan', lhs=lhs, rhs=rhs, name=name)

    def lessThanOrEqual(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`lessThanOrEqual $lhs , $rhs`: a ≤ b.'
        return self.create('lessThanOrEqual', lhs=lhs, rhs=rhs, name=name)

    def greaterThan(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`greaterThan $lhs , $rhs`: a > b.'
        return self.create('greaterThan', lhs=lhs, rhs=rhs, name=name)

    def greaterThanOrEqual(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`greaterThanOrEqual $lhs , $rhs`: a ≥ b.'
        return self.create('greaterThanOrEqual', lhs=lhs, rhs=rhs, name=name)

    def equal(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`equal $lhs , $rhs`: a = b.'
        return self.create('equal', lhs=lhs, rhs=rhs, name=name)

    def notEqual(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`notEqual $lhs , $rhs`: a ≠ b.'
        return self.create('notEqual', lhs=lhs, rhs=rhs, name=name)

    def select(self, lhs: Operand, rhs: Operand, mask: Operand, *, name: str | None = None) -> Instruction:
        '`select $lhs , $rhs by $mask`: element-wise choice: lhs where mask is true, else rhs.'
        return self.create('select', lhs=lhs, rhs=rhs, mask=mask, name=name)

    def dataTypeCast(self, x: Operand, dtype: DataType, *, name: str | None = None) -> Instruction:
        '`dataTypeCast $x to $dtype:dtype`: convert each element to another data type.'
        return self.create('dataTypeCast', x=x, dtype=dtype, name=name)

    def allocateStack(self, type_: Type, count: int, *, name: str | None = None) -> Instruction:
        "`allocateStack $type_:type count $count:int`: allocate `count` values of a type in the function's frame."
        return self.create('allocateStack', type_=type_, count=count, name=name)

    def allocateHeap(self, type_: Type, count: Operand, *, name: str | None = None) -> Instruction:
        '`allocateHeap $type_:type count $count`: allocate `count` values of a type on the heap.'
        return self.create('allocateHeap', type_=type_, count=count, name=name)

    def allocateBox(self, type_: Type, *, name: str | None = None) -> Instruction:
        '`allocateBox $type_:type`: allocate a reference-counted box.'
        return self.create('allocateBox', type_=type_, name=name)

    def projectBox(self, box: Operand, *, name: str | None = None) -> Instruction:
        "`projectBox $box`: the address of a box's contents."
        return self.create('projectBox', box=box, name=name)

    def retain(self, box: Operand, *, name: str | None = None) -> Instruction:
        "`retain $box`: increment a box's reference count."
        return self.create('retain', box=box, name=name)

    def release(self, box: Operand, *, name: str | None = None) -> Instruction:
        "`release $box`: decrement a box's reference count, freeing it at zero."
        return self.create('release', box=box, name=name)

    def deallocate(self, pointer: Operand, *, name: str | None = None) -> Instruction:
        '`deallocate $pointer`: free memory.'
        return self.create('deallocate', pointer=pointer, name=name)

    def load(self, pointer: Operand, *, name: str | None = None) -> Instruction:
        '`load $pointer`: read the value at an address.'
        return self.create('load', pointer=pointer, name=name)

    def store(self, value: Operand, pointer: Operand, *, name: str | None = None) -> Instruction:
        '`store $value to $pointer`: write a value to an address.'
        return self.create('store', value=value, pointer=pointer, name=name)

    def elementPointer(self, pointer: Operand, keys: Sequence[Key], *, name: str | None = None) -> Instruction:
        '`elementPointer $pointer at $keys:keys`: the address of an element inside the pointee.'
        return self.create('elementPointer', pointer=pointer, keys=keys, name=name)

    def copy(self, source: Operand, destination: Operand, count: Operand, *, name: str | None = None) -> Instruction:
        '`copy from $source to $destination count $count`: copy `count` values between addresses.'
        return self.create('copy', source=source, destination=destination, count=count, name=name)

    def trap(self, *, name: str | None = None) -> Instruction:
        '`trap`: stop the program with an error.'
        return self.create('trap', name=name)

    def createStack(self, *, name: str | None = None) -> Instruction:
        '`createStack`: a new empty stack.'
        return self.create('createStack', name=name)

    def destroyStack(self, stack: Operand, *, name: str | None = None) -> Instruction:
        '`destroyStack $stack`: release a stack.'
        return self.create('destroyStack', stack=stack, name=name)

    def push(self, value: Operand, stack: Operand, *, name: str | None = None) -> Instruction:
        '`push $value to $stack`: push a value on a stack.'
        return self.create('push', value=value, stack=stack, name=name)

    def pop(self, type_: Type, stack: Operand, *, name: str | None = None) -> Instruction:
        '`pop $type_:type from $stack`: pop the most recently pushed value, of the given type.'
        return self.create('pop', type_=type_, stack=stack, name=name)

    def scan(self, x: Operand, combinator: Combinator, dims: Sequence[int], *, name: str | None = None) -> Instruction:
        '`scan $x by $combinator:combinator along $dims:ints`: inclusive prefix reduction along the listed dimensions.'
        return self.create('scan', x=x, combinator=combinator, dims=dims, name=name)

    def reduce(self, x: Operand, combinator: Combinator, init: Operand, dims: Sequence[int] | None = None, *, name: str | None = None) -> Instruction:
        '`reduce $x by $combinator:combinator init $init [along $dims:ints]`: fold the listed dimensions (all when `along` is absent) starting from init.'
        return self.create('reduce', x=x, combinator=combinator, init=init, dims=dims, name=name)

    def reduceWindow(self, x: Operand, combinator: Combinator, init: Operand, dims: Sequence[int], strides: Sequence[int], padding: str, *, name: str | None = None) -> Instruction:
        '`reduceWindow $x by $combinator:combinator init $init dims $dims:ints strides $strides:ints padding $padding:padding_mode`: pooling: fold each window (padded with init).'
        return self.create('reduceWindow', x=x, combinator=combinator, init=init, dims=dims, strides=strides, padding=padding, name=name)

    def dot(self, lhs: Operand, rhs: Operand, *, name: str | None = None) -> Instruction:
        '`dot $lhs , $rhs`: matrix product (batched over leading dimensions), or vector dot product.'
        return self.create('dot', lhs=lhs, rhs=rhs, name=name)

    def concatenate(self, xs: Sequence[Operand], axis: int, *, name: str | None = None) -> Instruction:
        '`concatenate $xs:uses along $axis:int`: join tensors along an axis.'
        return self.create('concatenate', xs=xs, axis=axis, name=name)

    def transpose(self, x: Operand, perm: Sequence[int] | None = None, *, name: str | None = None) -> Instruction:
        '`transpose $x [along $perm:ints]`: permute the dimensions: result dimension i is dimension perm[i] of the operand (all reversed when `along` is absent).'
        return self.create('transpose', x=x, perm=perm, name=name)

    def reverse(self, x: Operand, dims: Sequence[int], *, name: str | None = None) -> Instruction:
        '`reverse $x along $dims:ints`: reverse element order along the listed dimensions.'
        return self.create('reverse', x=x, dims=dims, name=name)

    def slice(self, x: Operand, lower: int, upper: int, *, name: str | None = None) -> Instruction:
        '`slice $x from $lower:int upto $upper:int`: the closed range [lower, upper] of dimension 0.'
        return self.create('slice', x=x, lower=lower, upper=upper, name=name)

    def padShape(self, x: Operand, axis: int, *, name: str | None = None) -> Instruction:
        '`padShape $x at $axis:int`: insert a dimension of size 1.'
        return self.create('padShape', x=x, axis=axis, name=name)

    def squeezeShape(self, x: Operand, axis: int, *, name: str | None = None) -> Instruction:
        '`squeezeShape $x at $axis:int`: remove a dimension of size 1.'
        return self.create('squeezeShape', x=x, axis=axis, name=name)

    def shapeCast(self, x: Operand, shape: Sequence[int | None], *, name: str | None = None) -> Instruction:
        '`shapeCast $x to $shape:shape`: reinterpret the shape, keeping the element count and order.'
        return self.create('shapeCast', x=x, shape=shape, name=name)

    def bitCast(self, x: Operand, target: Type, *, name: str | None = None) -> Instruction:
        '`bitCast $x to $target:type`: reinterpret the bits as another type of the same size.'
        return self.create('bitCast', x=x, target=target, name=name)

    def rank(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`rank of $x`: the number of dimensions.'
        return self.create('rank', x=x, name=name)

    def shape(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`shape of $x`: the dimensions, as an i64 vector.'
        return self.create('shape', x=x, name=name)

    def unitCount(self, x: Operand, *, name: str | None = None) -> Instruction:
        '`unitCount of $x`: the number of elements.'
        return self.create('unitCount', x=x, name=name)

    def random(self, shape: Sequence[int | None], lower: Operand, upper: Operand, *, name: str | None = None) -> Instruction:
        '`random $shape:shape from $lower upto $upper`: uniform random tensor in [lower, upper).'
        return self.create('random', shape=shape, lower=lower, upper=upper, name=name)

    def convolve(self, x: Operand, kernel: Operand, strides: Sequence[int] | None = None, padding: Sequence[tuple[int, int]] | None = None, leftDilation: Sequence[int] | None = None, rightDilation: Sequence[int] | None = None, groups: int | None = None, *, name: str | None = None) -> Instruction:
        '`convolve $x kernel $kernel [strides $strides:ints] [padding $padding:pads] [leftDilation $leftDilation:ints] [rightDilation $rightDilation:ints] [groups $groups:int]`: N-d convolution (cross-correlation) of [N, C, spatial…] by [O, C/g, window…].'
        return self.create('convolve', x=x, kernel=kernel, strides=strides, padding=padding, leftDilation=leftDilation, rightDilation=rightDilation, groups=groups, name=name)
