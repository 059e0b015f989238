"""Memory, boxes, globals, `trap`, and the stack used as the AD tape.

A DLVM pointer is `{block, address, offset, rank}`: the block is an allocation with a header
(cell count, cell size, freed flag, the number of pointers to it) and the address points
into its cells, so every access is checked — null, freed, out of bounds — and fails with the
interpreter's message instead of touching memory it must not. A pointer past a tensor's
index (`elementPointer %p at 0, 2` with a tensor in the cell) addresses the tensor and the
byte offset of its elements; a store through it copies the tensor first if anything else
shares its buffer. `load` copies out (a counted value is retained), `store` releases what it
overwrites and keeps what it writes.

Pointers are counted values, and a block lives as long as a pointer to it does, as memory
does in the interpreter: the last pointer to go releases what its cells hold (unless
`deallocate` did) and returns the block to the pool. So the block of an `allocateStack` goes
when its function's pointers do, and a pointer kept in a global still finds the header that
says whether `deallocate` freed its block. Boxes keep their own `retain`/`release` count
(their blocks and globals' cells are not counted by pointers).

Memory outlives the call that writes it: no block is tied to a call (a global's cell belongs
to the executable, and a pointer to any block may be stored in one). So what a cell holds
must be its own: a tensor borrowed from the caller is copied as it is stored (a counted one
is retained, not copied), and a zero tensor filling a fresh cell belongs to the cell, not
to the instruction that made it.

Stacks are counted runtime objects (see `support.py`): `push` copies the value in with its
type id and a release function, `pop` checks the id and the static dimensions of the popped
value; using an undefined stack (a fresh memory cell of type `stack`) is an error.
"""

from __future__ import annotations

from llvmlite import ir as ll

from dlvm.ir import GlobalVariable, Instruction
from dlvm.ir.types import BoxType, PointerType, TensorType, Type

from .emit import (
    add,
    for_range,
    gep,
    i32,
    i64,
    internal_function,
    memcpy,
    mul,
    product,
)
from .function import FunctionLowering, Tensor, lowers, make_tensor
from .layout import I1, I8, I32, I64, POINTER, PTR, VOID, element_size
from .lower_aggregate import (
    as_i64,
    check_index,
    check_same_shape,
    key_steps,
    zero_value,
)
from .support import (
    BLOCK_CELL_SIZE,
    BLOCK_COUNT,
    BLOCK_FREED,
    BLOCK_INITIALIZED,
    BLOCK_REFS,
    BLOCK_RELEASE_CELLS,
    CTX_GLOBALS,
    HEADER_BYTES,
    UNCOUNTED,
)

# header slots of a memory block (see `support.py`)
COUNT, CELL_SIZE, FREED, INITIALIZED = BLOCK_COUNT, BLOCK_CELL_SIZE, BLOCK_FREED, BLOCK_INITIALIZED
NULL = ll.Constant(PTR, None)


def size_of(b: ll.IRBuilder, t: ll.Type) -> ll.Value:
    return b.ptrtoint(b.gep(NULL, [i64(1)], source_etype=t), I64)


def block_data(b: ll.IRBuilder, block: ll.Value) -> ll.Value:
    return gep(b, I8, block, i64(HEADER_BYTES))


def new_block(fl: FunctionLowering, t: Type, count: ll.Value, refs: int = 1) -> ll.Value:
    """A block of `count` zero cells of type `t`, addressed by `refs` pointers (the new
    pointer's reference; `UNCOUNTED` for a box)."""
    b = fl.b
    cell = fl.layout.lower(t)
    size = size_of(b, cell)
    block = fl.alloc_array(count, size)
    b.store(count, gep(b, I64, block, i64(COUNT)))
    b.store(size, gep(b, I64, block, i64(CELL_SIZE)))
    b.store(i64(0), gep(b, I64, block, i64(FREED)))
    b.store(i64(refs), gep(b, I64, block, i64(BLOCK_REFS)))
    release = cells_release(fl, t)
    b.store(release if release is not None else NULL,
            gep(b, PTR, block, i64(BLOCK_RELEASE_CELLS)))
    data = block_data(b, block)
    with for_range(b, i64(0), count, "zero") as i:
        b.store(cell_zero(fl, t), gep(b, cell, data, i))
    return block


def cells_release(fl: FunctionLowering, t: Type) -> ll.Function | None:
    """void release(ctx, block): release what the cells of a block of `t` hold (None when
    they hold no counted value). A block keeps it in its header, so whatever pointer frees
    the block, its cells are released as the type they were allocated with."""
    if not fl.layout.managed(t):
        return None
    unit = fl.unit
    name = f"dlvm.release.cells.{unit.type_id(t)}"
    existing = unit.llmod.globals.get(name)
    if isinstance(existing, ll.Function):
        return existing
    fn, b = internal_function(unit.llmod, name, VOID, [PTR, PTR])
    ctx, block = fn.args
    cell = fl.layout.lower(t)
    saved_b, saved_ctx = fl.b, fl.ctx
    fl.b, fl.ctx = b, ctx
    try:
        count = b.load(gep(b, I64, block, i64(COUNT)), typ=I64)
        with for_range(b, i64(0), count, "cell") as i:
            fl.release(b.load(gep(b, cell, block_data(b, block), i), typ=cell), t)
    finally:
        fl.b, fl.ctx = saved_b, saved_ctx
    b.ret_void()
    return fn


def cell_zero(fl: FunctionLowering, t: Type) -> ll.Value:
    """The zero value a fresh cell starts with. The cell takes its reference: a large zero
    tensor's buffer (filled at run time) is not a temporary of the current instruction,
    which would release it when done."""

    made = len(fl.temporaries)
    zero = zero_value(fl, t)
    del fl.temporaries[made:]
    return zero


def make_pointer(b: ll.IRBuilder, block: ll.Value, address: ll.Value,
                 offset: ll.Value | None = None, rank: int = 0) -> ll.Value:
    p: ll.Value = ll.Constant(POINTER, None)
    p = b.insert_value(p, block, 0)
    p = b.insert_value(p, address, 1)
    p = b.insert_value(p, offset if offset is not None else i64(-1), 2)
    return b.insert_value(p, i64(rank), 3)


def checked_address(fl: FunctionLowering, p: ll.Value, what: str, t: ll.Type | None
                    ) -> ll.Value:
    """The address of a pointer, after checking it is not null, not freed, and that a value
    of type `t` there (one byte if None) lies inside its allocation."""
    b = fl.b
    block = b.extract_value(p, 0)
    address = b.extract_value(p, 1)
    fl.fail_if(b.icmp_unsigned("==", block, NULL), f"{what} is null")
    freed = b.load(gep(b, I64, block, i64(FREED)), typ=I64)
    fl.fail_if(b.icmp_signed("!=", freed, i64(0)), "use of deallocated memory")
    start = b.ptrtoint(block_data(b, block), I64)
    cell = b.load(gep(b, I64, block, i64(CELL_SIZE)), typ=I64)
    end = b.add(start, mul(b, b.load(gep(b, I64, block, i64(COUNT)), typ=I64), cell))
    at = b.ptrtoint(address, I64)
    size = size_of(b, t) if t is not None else i64(1)
    inside = b.and_(b.icmp_unsigned(">=", at, start),
                    b.icmp_unsigned("<=", b.add(at, size), end))
    index = b.sdiv(b.sub(at, start), cell)
    fl.fail_if(b.not_(inside), "pointer index {0} out of bounds", [index])
    return address


def pointee(fl: FunctionLowering, v: object) -> Type:
    t = fl.type(v)  # type: ignore[arg-type]
    if isinstance(t, BoxType):
        return t.boxed
    assert isinstance(t, PointerType), t
    return t.pointee


def is_element(b: ll.IRBuilder, p: ll.Value) -> ll.Value:
    return b.icmp_signed(">=", b.extract_value(p, 2), i64(0))


def read(fl: FunctionLowering, p: ll.Value, t: Type, what: str = "pointer") -> ll.Value:
    """The value a pointer addresses (no count changed)."""
    b = fl.b
    lt = fl.layout.lower(t)
    rt = fl.layout.resolve(t)
    if not isinstance(rt, TensorType):
        return b.load(checked_address(fl, p, what, lt), typ=lt)

    slot = fl.result_slot(lt)
    with b.if_else(is_element(b, p)) as (element, plain):
        with element:
            struct = checked_address(fl, p, what, None)
            data = gep(b, I8, b.load(gep(b, PTR, struct, i64(1)), typ=PTR),
                       b.extract_value(p, 2))
            if rt.rank == 0:
                b.store(fl.load_scalar(data, rt), slot)
            else:
                rank = b.extract_value(p, 3)
                buf = b.load(struct, typ=PTR)
                dims = [i64(d) if d is not None else b.load(gep(
                    b, I64, struct, b.add(i64(2), b.sub(rank, i64(rt.rank - k)))), typ=I64)
                    for k, d in enumerate(rt.shape)]
                b.store(make_tensor(b, buf, data, dims), slot)
        with plain:
            b.store(b.load(checked_address(fl, p, what, lt), typ=lt), slot)
    return b.load(slot, typ=lt)


def write(fl: FunctionLowering, p: ll.Value, t: Type, value: ll.Value,
          what: str = "pointer") -> None:
    """Store a value (the memory takes its reference, and a copy of what the caller lent
    the call: see `FunctionLowering.keep`) and release what it replaces. A tensor reached by
    an element pointer is copied first when anything else shares it, so that a value never
    changes under its other holders."""
    b = fl.b
    lt = fl.layout.lower(t)
    rt = fl.layout.resolve(t)

    def plain_store() -> None:
        address = checked_address(fl, p, what, lt)
        kept = fl.keep(value, t)
        old = b.load(address, typ=lt)
        b.store(kept, address)
        fl.release(old, t)

    if not isinstance(rt, TensorType):
        plain_store()
        return
    with b.if_else(is_element(b, p)) as (element, plain):
        with element:
            struct = checked_address(fl, p, what, None)
            unshare(fl, struct, b.extract_value(p, 3), rt)
            data = b.load(gep(b, PTR, struct, i64(1)), typ=PTR)
            target = gep(b, I8, data, b.extract_value(p, 2))
            if rt.rank == 0:
                fl.store_scalar(value, target)
            else:

                v = Tensor(b, value, rt)
                rank = b.extract_value(p, 3)
                place = [i64(d) if d is not None else b.load(gep(
                    b, I64, struct, b.add(i64(2), b.sub(rank, i64(rt.rank - k)))), typ=I64)
                    for k, d in enumerate(rt.shape)]
                check_same_shape(fl, v.dims, place, "store")
                memcpy(b, target, v.data, mul(b, v.count(), i64(element_size(rt.dtype))))
                fl.release(value, t)
        with plain:
            plain_store()


def unshare(fl: FunctionLowering, struct: ll.Value, rank: ll.Value, t: TensorType) -> None:
    """Give the tensor at `struct` a buffer of its own (copy on write)."""
    b = fl.b
    buf = b.load(struct, typ=PTR)
    with b.if_then(b.icmp_signed("!=", b.load(buf, typ=I64), i64(1))):
        data = b.load(gep(b, PTR, struct, i64(1)), typ=PTR)

        count = fl.result_slot(I64)
        b.store(i64(1), count)
        with for_range(b, i64(0), rank, "dim") as k:
            d = b.load(gep(b, I64, struct, b.add(i64(2), k)), typ=I64)
            b.store(b.mul(b.load(count, typ=I64), d), count)
        nbytes = mul(b, b.load(count, typ=I64), i64(element_size(t.dtype)))
        fresh = fl.alloc(nbytes)
        new_data = fl.rt.data(b, fresh)
        memcpy(b, new_data, data, nbytes)
        b.store(fresh, struct)
        b.store(new_data, gep(b, PTR, struct, i64(1)))
        b.call(fl.rt.get("release"), [fl.ctx, buf])


def load_pointer(fl: FunctionLowering, p: ll.Value, t: PointerType) -> ll.Value:
    return read(fl, p, t.pointee)


def as_pointer(fl: FunctionLowering, inst: Instruction, field: str) -> ll.Value:
    """A pointer operand, or a box's contents."""
    v = inst.fields[field]
    value = fl.value(v)
    if isinstance(fl.type(v), BoxType):
        box = value
        fl.fail_if(fl.b.icmp_unsigned("==", box, NULL), "box is null")
        return make_pointer(fl.b, box, block_data(fl.b, box))
    return value


# ---------------------------------------------------------------- allocation


@lowers("allocateStack")
def lower_allocate_stack(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    block = new_block(fl, inst.type_, i64(inst.count))
    return make_pointer(fl.b, block, block_data(fl.b, block))


@lowers("allocateHeap")
def lower_allocate_heap(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    count = fl.value(inst.count)
    count = fl.b.sext(count, I64) if count.type.width < 64 else count
    fl.fail_if(fl.b.icmp_signed("<", count, i64(0)), "allocation of a negative count {0}",
               [count])
    block = new_block(fl, inst.type_, count)
    return make_pointer(fl.b, block, block_data(fl.b, block))


@lowers("allocateBox")
def lower_allocate_box(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    return new_block(fl, inst.type_, i64(1), refs=UNCOUNTED)


def live_box(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    b = fl.b
    box = fl.value(inst.box)
    fl.fail_if(b.icmp_unsigned("==", box, NULL), "box is null")
    freed = b.load(gep(b, I64, box, i64(FREED)), typ=I64)
    fl.fail_if(b.icmp_signed("!=", freed, i64(0)), "use of a freed box")
    return box


@lowers("projectBox")
def lower_project_box(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    box = live_box(fl, inst)
    return make_pointer(fl.b, box, block_data(fl.b, box))


@lowers("retain")
def lower_retain(fl: FunctionLowering, inst: Instruction) -> None:
    box = live_box(fl, inst)
    fl.b.store(fl.b.add(fl.b.load(box, typ=I64), i64(1)), box)


@lowers("release")
def lower_release(fl: FunctionLowering, inst: Instruction) -> None:
    b = fl.b
    box = live_box(fl, inst)
    count = b.sub(b.load(box, typ=I64), i64(1))
    b.store(count, box)
    with b.if_then(b.icmp_signed("==", count, i64(0))):
        fl.rt.free_cells(b, fl.ctx, box)


@lowers("deallocate")
def lower_deallocate(fl: FunctionLowering, inst: Instruction) -> None:
    b = fl.b
    p = as_pointer(fl, inst, "pointer")
    block = b.extract_value(p, 0)
    fl.fail_if(b.icmp_unsigned("==", block, NULL), "pointer is null")
    freed = b.load(gep(b, I64, block, i64(FREED)), typ=I64)
    fl.fail_if(b.icmp_signed("!=", freed, i64(0)), "double deallocation")
    fl.rt.free_cells(b, fl.ctx, block)


# ---------------------------------------------------------------- access
# ---------------------------------------------------------------- access


@lowers("load")
def lower_load(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    t = pointee(fl, inst.pointer)
    value = read(fl, as_pointer(fl, inst, "pointer"), t)
    fl.retain(value, t)
    return value


@lowers("store")
def lower_store(fl: FunctionLowering, inst: Instruction) -> None:
    t = pointee(fl, inst.pointer)
    write(fl, as_pointer(fl, inst, "pointer"), t, fl.value(inst.value))


@lowers("elementPointer")
def lower_element_pointer(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """An address inside the pointee: a GEP through tuples, structs and arrays; past a
    tensor, the byte offset of the indexed elements (checked against its sizes)."""

    b = fl.b
    p = as_pointer(fl, inst, "pointer")
    t = pointee(fl, inst.pointer)
    steps = key_steps(fl, t, inst.keys)
    indices: list[ll.Value] = [i64(0)]
    current = t
    k = 0
    while k < len(steps) and steps[k].kind != "tensor":
        s = steps[k]
        if s.kind == "array":
            index = as_i64(fl, s.index)
            rt = fl.layout.resolve(current)
            check_index(fl, index, rt.count)  # type: ignore[union-attr]
            indices.append(index)
        else:
            indices.append(ll.Constant(I32, s.index))
        current = s.inner
        k += 1
    block = b.extract_value(p, 0)
    address = b.extract_value(p, 1)
    if len(indices) > 1:
        address = b.gep(address, indices, inbounds=True, source_etype=fl.layout.lower(t))
    b.call(fl.rt.get("block_retain"), [block])  # the result addresses the block too
    if k == len(steps):
        return make_pointer(b, block, address)
    tensor_t = fl.layout.resolve(current)
    assert isinstance(tensor_t, TensorType)
    tensor = Tensor(b, read(fl, make_pointer(b, block, address), tensor_t), tensor_t)
    offset: ll.Value = i64(0)
    dims = tensor.dims
    for s in steps[k:]:
        index = as_i64(fl, s.index)
        check_index(fl, index, dims[0])
        offset = add(b, offset, mul(b, index, product(b, dims[1:])))
        dims = dims[1:]
    nbytes = mul(b, offset, i64(element_size(tensor_t.dtype)))
    return make_pointer(b, block, address, nbytes, tensor_t.rank)


def held_dim(fl: FunctionLowering, struct: ll.Value, k: ll.Value) -> ll.Value:
    """Dimension `k` of the tensor held at `struct` (a cell's tensor an element pointer
    points into)."""
    return fl.b.load(gep(fl.b, I64, struct, fl.b.add(i64(2), k)), typ=I64)


def element_stride(fl: FunctionLowering, p: ll.Value, rt: TensorType) -> ll.Value:
    """The bytes of one value of type `rt` in the tensor an element pointer points into:
    its last `rt.rank` dimensions' (read at run time where `rt` leaves them `_`)."""
    b = fl.b
    if rt.is_static:
        return i64((rt.count or 0) * element_size(rt.dtype))
    struct = checked_address(fl, p, "pointer", None)
    rank = b.extract_value(p, 3)
    dims = [i64(d) if d is not None else held_dim(fl, struct, b.sub(rank, i64(rt.rank - k)))
            for k, d in enumerate(rt.shape)]
    return mul(b, product(b, dims), i64(element_size(rt.dtype)))


def step(fl: FunctionLowering, p: ll.Value, n: ll.Value, t: Type,
         stride: ll.Value | None) -> ll.Value:
    """The pointer `n` values on: the next cells, or the next elements of a tensor (`stride`
    bytes each: see `element_stride`; None when `t` is no tensor)."""
    b = fl.b
    lt = fl.layout.lower(t)
    plain = b.insert_value(p, gep(b, lt, b.extract_value(p, 1), n), 1)
    if stride is None:
        return plain
    on = b.insert_value(p, b.add(b.extract_value(p, 2), mul(b, n, stride)), 2)
    return b.select(is_element(b, p), on, plain)


def check_span(fl: FunctionLowering, p: ll.Value, n: ll.Value, t: Type, problem: str) -> None:
    """Fail unless `n` ≥ 1 values from `p` on lie inside what `p` points into, naming the
    first that does not, as the interpreter does: its block's cells, or, for an element
    pointer, the last dimension its keys index (the interpreter steps the last key)."""
    b = fl.b
    what = f"{problem}: pointer"
    rt = fl.layout.resolve(t)
    with b.if_else(is_element(b, p) if isinstance(rt, TensorType) else ll.Constant(I1, 0)
                   ) as (element, plain):
        with element:
            if isinstance(rt, TensorType):
                struct = checked_address(fl, p, what, None)
                rank = b.extract_value(p, 3)
                last = b.sub(rank, i64(rt.rank + 1))  # the dimension of the last key
                size = held_dim(fl, struct, last)

                inner = fl.result_slot(I64)
                b.store(i64(1), inner)
                with for_range(b, b.add(last, i64(1)), rank, "inner") as k:
                    b.store(b.mul(b.load(inner, typ=I64), held_dim(fl, struct, k)), inner)
                elements = b.load(inner, typ=I64)
                safe = b.select(b.icmp_signed("<", elements, i64(1)), i64(1), elements)
                at = b.sdiv(b.sdiv(b.extract_value(p, 2), i64(element_size(rt.dtype))), safe)
                index = b.srem(at, b.select(b.icmp_signed("<", size, i64(1)), i64(1), size))
                fl.fail_if(b.icmp_signed(">", b.add(index, n), size),
                           f"{problem}: index {{0}} out of bounds for size {{0}}", [size])
        with plain:
            block = b.extract_value(p, 0)
            checked_address(fl, p, what, fl.layout.lower(t))  # null, freed, the first value
            start = b.ptrtoint(block_data(b, block), I64)
            cell = b.load(gep(b, I64, block, i64(CELL_SIZE)), typ=I64)
            count = b.load(gep(b, I64, block, i64(COUNT)), typ=I64)
            index = b.sdiv(b.sub(b.ptrtoint(b.extract_value(p, 1), I64), start), cell)
            fl.fail_if(b.icmp_signed(">", b.add(index, n), count),
                       f"{what} index {{0}} out of bounds", [count])


@lowers("copy")
def lower_copy(fl: FunctionLowering, inst: Instruction) -> None:
    """`count` values, each read before any is written (the ranges may overlap). Both
    ranges are checked before anything is staged, so that a huge count past an end is
    refused at once."""
    b = fl.b
    t = pointee(fl, inst.source)
    lt = fl.layout.lower(t)
    rt = fl.layout.resolve(t)
    n = fl.value(inst.count)
    n = b.sext(n, I64) if n.type.width < 64 else n
    fl.fail_if(b.icmp_signed("<", n, i64(0)), "negative count {0}", [n])
    src = as_pointer(fl, inst, "source")
    dst = as_pointer(fl, inst, "destination")
    with b.if_then(b.icmp_signed(">", n, i64(0))):
        check_span(fl, src, n, t, "copy reads past the end of its source")
        check_span(fl, dst, n, t, "copy writes past the end of its destination")
    strides: list[ll.Value | None] = [None, None]
    if isinstance(rt, TensorType):
        for k, p in enumerate((src, dst)):

            slot = fl.result_slot(I64)
            b.store(i64(0), slot)
            with b.if_then(b.and_(is_element(b, p), b.icmp_signed(">", n, i64(0)))):
                b.store(element_stride(fl, p, rt), slot)
            strides[k] = b.load(slot, typ=I64)
    buffer = fl.alloc_array(n, size_of(b, lt))
    staged = fl.rt.data(b, buffer)
    with for_range(b, i64(0), n, "read") as i:
        value = read(fl, step(fl, src, i, t, strides[0]), t,
                     "copy reads past the end of its source: pointer")
        fl.retain(value, t)
        b.store(value, gep(b, lt, staged, i))
    with for_range(b, i64(0), n, "store") as i:
        write(fl, step(fl, dst, i, t, strides[1]), t, b.load(gep(b, lt, staged, i), typ=lt),
              "copy writes past the end of its destination: pointer")
    b.call(fl.rt.get("release"), [fl.ctx, buffer])


@lowers("trap")
def lower_trap(fl: FunctionLowering, inst: Instruction) -> None:
    fl.fail(fl.site("trap"))
    fl.b.position_at_end(fl.llfn.append_basic_block("after.trap"))


# ---------------------------------------------------------------- globals


def global_pointer(fl: FunctionLowering, g: GlobalVariable) -> ll.Value:
    """A global's cell, zero-initialized on first use (as the interpreter does). Cells live
    in a table the context points to, so that every compiled function of an executable
    shares them."""
    b = fl.b
    lt = fl.layout.lower(g.value_type)
    index = fl.unit.module.globals.index(g)
    table = b.inttoptr(b.load(fl.rt.slot(b, fl.ctx, CTX_GLOBALS), typ=I64), PTR)
    cell = b.load(gep(b, PTR, table, i64(index)), typ=PTR)
    with b.if_then(b.icmp_signed("==", b.load(gep(b, I64, cell, i64(INITIALIZED)), typ=I64),
                                 i64(0)), likely=False):
        b.store(i64(-1), cell)
        b.store(i64(1), gep(b, I64, cell, i64(COUNT)))
        b.store(size_of(b, lt), gep(b, I64, cell, i64(CELL_SIZE)))
        b.store(i64(1), gep(b, I64, cell, i64(INITIALIZED)))
        b.store(i64(UNCOUNTED), gep(b, I64, cell, i64(BLOCK_REFS)))
        b.store(cell_zero(fl, g.value_type), block_data(b, cell))
    return make_pointer(b, cell, block_data(b, cell))


# ---------------------------------------------------------------- stacks
# ---------------------------------------------------------------- stacks


def item_release(fl: FunctionLowering, t: Type) -> ll.Function:
    """i64 release(ctx, trailer): release the item below the trailer, return its size."""
    unit = fl.unit
    lt = fl.layout.lower(t)
    name = f"dlvm.release.item.{unit.type_id(t)}"
    existing = unit.llmod.globals.get(name)
    if isinstance(existing, ll.Function):
        return existing
    fn, b = internal_function(unit.llmod, name, I64, [PTR, PTR])
    ctx, trailer = fn.args
    size = size_of(b, lt)
    padded = b.and_(b.add(size, i64(7)), i64(~7))
    if fl.layout.managed(t):
        item = gep(b, I8, trailer, b.sub(i64(0), padded))
        saved_b, saved_ctx = fl.b, fl.ctx
        fl.b, fl.ctx = b, ctx
        try:
            fl.release(b.load(item, typ=lt), t)
        finally:
            fl.b, fl.ctx = saved_b, saved_ctx
    b.ret(padded)
    return fn


@lowers("createStack")
def lower_create_stack(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    s = fl.b.call(fl.rt.get("stack_new"), [])
    fl.fail_if(fl.b.icmp_unsigned("==", s, NULL), "out of memory (a new stack)")
    return s


def defined_stack(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    s = fl.value(inst.stack)
    fl.fail_if(fl.b.icmp_unsigned("==", s, NULL), "use of an undefined stack")
    return s


@lowers("destroyStack")
def lower_destroy_stack(fl: FunctionLowering, inst: Instruction) -> None:
    fl.b.call(fl.rt.get("stack_clear"), [fl.ctx, defined_stack(fl, inst)])


@lowers("push")
def lower_push(fl: FunctionLowering, inst: Instruction) -> None:

    b = fl.b
    t = fl.type(inst.value)
    lt = fl.layout.lower(t)
    slot = fl.result_slot(lt)
    b.store(fl.value(inst.value), slot)
    status = b.call(fl.rt.get("stack_push"), [
        defined_stack(fl, inst), slot, size_of(b, lt), i64(fl.unit.type_id(inst.value.type)),
        item_release(fl, t)])
    fl.fail_if(b.icmp_signed("!=", status, i32(0)), "out of memory (pushing on a stack)")


@lowers("pop")
def lower_pop(fl: FunctionLowering, inst: Instruction) -> ll.Value:

    b = fl.b
    t = inst.type_
    lt = fl.layout.lower(t)
    slot = fl.result_slot(lt)
    top = fl.result_slot(I64)
    status = b.call(fl.rt.get("stack_pop"), [defined_stack(fl, inst), slot, size_of(b, lt),
                                              i64(fl.unit.type_id(t))])
    fl.fail_if(b.icmp_signed("==", status, i32(1)), "pop from an empty stack")
    with b.if_then(b.icmp_signed("==", status, i32(2)), likely=False):
        b.store(b.load(slot, typ=I64), top)  # the top item's type id
        fl.rt.fail(b, fl.ctx, fl.unit.site(f"pop of '{t}' from a stack whose top is '{{0}}'",
                                           inst, types=True),
                   [b.load(top, typ=I64)])
    value = b.load(slot, typ=lt)
    rt = fl.layout.resolve(t)
    have = rt.with_shape((None,) * rt.rank) if isinstance(rt, TensorType) else rt
    fl.conform(value, have, t, "popped value")
    return value
