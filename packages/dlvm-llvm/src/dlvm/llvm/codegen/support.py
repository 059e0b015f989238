"""The run-time support every compiled module carries: buffers, the AD tape, errors.

It is emitted as internal LLVM functions into each module, so LLVM inlines and optimizes it
with the code that uses it, and a compiled object needs nothing but libc (and BLAS) to load.

**Context.** Every compiled function takes `ptr ctx`, an array of i64 slots owned by the
caller in Python (one per executable and thread): the error site and its parameters, the
call depth, and the buffer pool's free lists.

**Buffers.** A tensor's elements live in a buffer: a 64-byte header `{i64 refcount, i64 size
class, i64 next}` followed by the data, 64-byte aligned. Buffers come from a pool of free
lists by power-of-two size class (so a steady state of calls reuses memory and allocates
nothing), or straight from `posix_memalign` beyond 1 GiB. A negative count marks a buffer
the program does not own: retain and release leave it alone and it is never updated in
place. `IMMORTAL` is a constant of the compiled code, alive as long as its executable;
`BORROWED` is a caller's array, alive only until the call returns, so whatever keeps a
tensor past the call (memory, an enum) copies a borrowed one first (`FunctionLowering.keep`).
A buffer that a call returns to Python leaves the pool: numpy's array frees it with `free`
when it is collected.

**Memory blocks** (`allocateStack`, `allocateHeap`, `allocateBox`) are buffers whose header
also holds their cell count and size, a freed flag, and a count of the DLVM pointers that
address them (slot `BLOCK_REFS`): the last pointer to go returns the block to the pool,
releasing its cells first unless `deallocate` did. So a block lives as long as a pointer to
it does, whichever call made it, as in the interpreter, and a pointer never outlives the
header that says whether its block was freed. A box's block and a global's cell are not
counted (their count is -1): boxes keep DLVM's own `retain`/`release` count, and globals
live as long as their executable.

**Stacks** (the AD tape) are growable byte arrays of items, each followed by a trailer
`{i64 type id, ptr release function}` so that `pop` checks the type and `destroyStack`
releases what is left. A stack is reference counted like a buffer: it lives while a value
(a register, a memory cell, another stack's item) holds it, so one kept in a global outlives
the call that made it.
"""

from __future__ import annotations

from llvmlite import ir as ll

from ..codegen.emit import (
    alloca,
    byte_offset,
    call_pointer,
    declare,
    gep,
    global_variable,
    i32,
    i64,
    internal_function,
    memcpy,
)
from ..codegen.layout import I1, I32, I64, PTR, VOID

HEADER_BYTES = 64
POOL_CLASSES = 40
UNPOOLED_BYTES = 1 << 30
IMMORTAL = -1  # the count of a constant's buffer
BORROWED = -2  # the count of the shared header of a caller's arrays

# context slots (i64 each): the error site and its parameters, the call depth, the address
# of the executable's random stream (its key and counter), the kernel thread count, the
# table of global variables' cells, the executable's id (for its callbacks), a count of
# loop iterations, the deadline of the call and the clock it is on, and the pool's free lists
CTX_SITE, CTX_PARAMS, CTX_DEPTH, CTX_RANDOM, CTX_THREADS, CTX_GLOBALS, CTX_RNG = 0, 1, 5, 6, 7, 8, 9
CTX_TICKS, CTX_DEADLINE, CTX_CLOCK = 10, 11, 12
CTX_FREE = 13
TICKS_PER_CLOCK_READ = 1 << 12
CTX_SLOTS = CTX_FREE + POOL_CLASSES
N_PARAMS = 4

# header slots of a memory block (i64 each): 0 and 1 are the buffer's count and size class,
# 2 (a pooled buffer's free-list link) the function that releases what its cells hold
BLOCK_RELEASE_CELLS, BLOCK_COUNT, BLOCK_CELL_SIZE, BLOCK_FREED = 2, 3, 4, 5
BLOCK_INITIALIZED, BLOCK_REFS = 6, 7  # (a global's cell), pointers to the block
UNCOUNTED = -1  # the pointer count of a box's block and of a global's cell

STACK_BYTES = 32  # {ptr data, i64 size, i64 capacity, i64 references}
STACK_REFS = 3
TRAILER_BYTES = 16


class Runtime:
    """The runtime functions of one LLVM module, defined on first use."""

    def __init__(self, module: ll.Module) -> None:
        self.module = module
        self.functions: dict[str, ll.Function] = {}
        borrowed = global_variable(module, ll.ArrayType(I64, 8), "dlvm.borrowed")
        borrowed.linkage = "internal"
        borrowed.initializer = ll.Constant(ll.ArrayType(I64, 8), [BORROWED] + [0] * 7)
        self.borrowed = borrowed  # the header shared by every array a caller lends a call

    def get(self, name: str) -> ll.Function:
        fn = self.functions.get(name)
        if fn is None:
            fn = self.functions[name] = getattr(self, "_define_" + name.replace(".", "_"))()
        return fn

    # ------------------------------------------------------------ context

    @staticmethod
    def slot(b: ll.IRBuilder, ctx: ll.Value, index: int | ll.Value) -> ll.Value:
        return gep(b, I64, ctx, i64(index) if isinstance(index, int) else index)

    def fail(self, b: ll.IRBuilder, ctx: ll.Value, site: int,
             params: list[ll.Value] | tuple[ll.Value, ...] = ()) -> None:
        """Record error `site` (with up to four i64 parameters) and return 1."""
        b.store(i64(site), self.slot(b, ctx, CTX_SITE))
        for k, p in enumerate(params[:N_PARAMS]):
            b.store(p, self.slot(b, ctx, CTX_PARAMS + k))
        b.ret(i32(1))

    def tick(self, b: ll.IRBuilder, ctx: ll.Value, site: int) -> None:
        """Count a loop iteration (or a call); every few thousand, fail with `site` if the
        call's deadline has passed."""
        slot = self.slot(b, ctx, CTX_TICKS)
        n = b.add(b.load(slot, typ=I64), i64(1))
        b.store(n, slot)
        due = b.icmp_signed("==", b.and_(n, i64(TICKS_PER_CLOCK_READ - 1)), i64(0))
        with b.if_then(due, likely=False):
            late = b.call(self.get("expired"), [ctx])
            with b.if_then(late, likely=False):
                self.fail(b, ctx, site)

    def _define_expired(self) -> ll.Function:
        """Whether the monotonic clock has passed the context's deadline (0: none)."""
        fn, b = internal_function(self.module, "dlvm.rt.expired", I1, [PTR])
        (ctx,) = fn.args
        deadline = b.load(self.slot(b, ctx, CTX_DEADLINE), typ=I64)
        with b.if_then(b.icmp_signed("==", deadline, i64(0))):
            b.ret(ll.Constant(I1, 0))
        clock = b.trunc(b.load(self.slot(b, ctx, CTX_CLOCK), typ=I64), I32)
        ts = alloca(b, ll.ArrayType(I64, 2))
        gettime = declare(self.module, "clock_gettime", I32, [I32, PTR])
        b.call(gettime, [clock, ts])
        now = b.add(b.mul(b.load(ts, typ=I64), i64(1_000_000_000)),
                    b.load(gep(b, I64, ts, i64(1)), typ=I64))
        b.ret(b.icmp_signed(">", now, deadline))
        return fn

    # ------------------------------------------------------------ libc

    def libc(self, name: str) -> ll.Function:
        signatures = {
            "posix_memalign": (I32, [PTR, I64, I64]),
            "free": (VOID, [PTR]),
            "malloc": (PTR, [I64]),
            "realloc": (PTR, [PTR, I64]),
        }
        ret, args = signatures[name]
        return declare(self.module, name, ret, args)

    # ------------------------------------------------------------ buffers

    def _define_alloc(self) -> ll.Function:
        """ptr alloc(ctx, nbytes): a buffer with count 1, or null when memory runs out."""
        fn, b = internal_function(self.module, "dlvm.rt.alloc", PTR, [PTR, I64])
        ctx, nbytes = fn.args
        total = b.add(nbytes, i64(HEADER_BYTES))
        big = b.icmp_signed(">", total, i64(UNPOOLED_BYTES))
        slot = alloca(b, PTR)
        b.store(ll.Constant(PTR, None), slot)  # posix_memalign leaves it alone on failure
        with b.if_else(big) as (then, otherwise):
            with then:
                rounded = b.and_(b.add(total, i64(63)), i64(~63))
                b.call(self.libc("posix_memalign"), [slot, i64(64), rounded])
                p = b.load(slot, typ=PTR)
                with b.if_then(b.icmp_unsigned("!=", p, ll.Constant(PTR, None))):
                    b.store(i64(-1), gep(b, I64, p, i64(1)))
            with otherwise:
                ctlz = declare(self.module, "llvm.ctlz.i64", I64, [I64, I1])
                lz = b.call(ctlz, [b.sub(total, i64(1)), ll.Constant(I1, 0)])
                cls = b.sub(i64(64 - 6), lz)  # ceil(log2 total) - 6
                cls = b.select(b.icmp_signed("<", cls, i64(0)), i64(0), cls)
                head_slot = self.slot(b, ctx, b.add(cls, i64(CTX_FREE)))
                head = b.load(b.bitcast(head_slot, PTR), typ=PTR)
                b.store(ll.Constant(PTR, None), slot)
                with b.if_else(b.icmp_unsigned("!=", head, ll.Constant(PTR, None))) as (
                        reuse, fresh):
                    with reuse:
                        nxt = b.load(gep(b, PTR, head, i64(2)), typ=PTR)
                        b.store(nxt, b.bitcast(head_slot, PTR))
                        b.store(head, slot)
                    with fresh:
                        size = b.shl(i64(64), cls)
                        b.call(self.libc("posix_memalign"), [slot, i64(64), size])
                p = b.load(slot, typ=PTR)
                with b.if_then(b.icmp_unsigned("!=", p, ll.Constant(PTR, None))):
                    b.store(cls, gep(b, I64, p, i64(1)))
        p = b.load(slot, typ=PTR)
        with b.if_then(b.icmp_unsigned("!=", p, ll.Constant(PTR, None))):
            b.store(i64(1), p)
        b.ret(p)
        return fn

    def _define_free_buffer(self) -> ll.Function:
        """Return a buffer whose count reached zero to its pool (or to libc)."""
        fn, b = internal_function(self.module, "dlvm.rt.free_buffer", VOID, [PTR, PTR])
        ctx, buf = fn.args
        cls = b.load(gep(b, I64, buf, i64(1)), typ=I64)
        with b.if_else(b.icmp_signed("<", cls, i64(0))) as (unpooled, pooled):
            with unpooled:
                b.call(self.libc("free"), [buf])
            with pooled:
                head_slot = b.bitcast(self.slot(b, ctx, b.add(cls, i64(CTX_FREE))), PTR)
                b.store(b.load(head_slot, typ=PTR), gep(b, PTR, buf, i64(2)))
                b.store(buf, head_slot)
        b.ret_void()
        return fn

    def _define_release(self) -> ll.Function:
        fn, b = internal_function(self.module, "dlvm.rt.release", VOID, [PTR, PTR], inline=True)
        ctx, buf = fn.args
        with b.if_then(b.icmp_unsigned("==", buf, ll.Constant(PTR, None)), likely=False):
            b.ret_void()  # an `undefined` value
        rc = b.load(buf, typ=I64)
        with b.if_then(b.icmp_signed(">", rc, i64(0)), likely=True):
            left = b.sub(rc, i64(1))
            b.store(left, buf)
            with b.if_then(b.icmp_signed("==", left, i64(0))):
                b.call(self.get("free_buffer"), [ctx, buf])
        b.ret_void()
        return fn

    def _define_retain(self) -> ll.Function:
        fn, b = internal_function(self.module, "dlvm.rt.retain", VOID, [PTR], inline=True)
        (buf,) = fn.args
        with b.if_then(b.icmp_unsigned("==", buf, ll.Constant(PTR, None)), likely=False):
            b.ret_void()
        rc = b.load(buf, typ=I64)
        with b.if_then(b.icmp_signed(">", rc, i64(0)), likely=True):
            b.store(b.add(rc, i64(1)), buf)
        b.ret_void()
        return fn

    def _define_borrowed(self) -> ll.Function:
        """Whether a buffer is a caller's array, which is gone once the call returns."""
        fn, b = internal_function(self.module, "dlvm.rt.borrowed", I1, [PTR], inline=True)
        (buf,) = fn.args
        with b.if_then(b.icmp_unsigned("==", buf, ll.Constant(PTR, None)), likely=False):
            b.ret(ll.Constant(I1, 0))  # an `undefined` value
        b.ret(b.icmp_signed("==", b.load(buf, typ=I64), i64(BORROWED)))
        return fn

    def _define_unique(self) -> ll.Function:
        """Whether the caller holds the only reference (so the buffer may be updated in place)."""
        fn, b = internal_function(self.module, "dlvm.rt.unique", I1, [PTR], inline=True)
        (buf,) = fn.args
        b.ret(b.icmp_signed("==", b.load(buf, typ=I64), i64(1)))
        return fn

    def data(self, b: ll.IRBuilder, buf: ll.Value) -> ll.Value:
        return byte_offset(b, buf, HEADER_BYTES)

    # ------------------------------------------------------------ stacks

    def _define_stack_new(self) -> ll.Function:
        """A new empty stack with one reference, or null when memory runs out."""
        fn, b = internal_function(self.module, "dlvm.rt.stack_new", PTR, [])
        s = b.call(self.libc("malloc"), [i64(STACK_BYTES)])
        with b.if_then(b.icmp_unsigned("!=", s, ll.Constant(PTR, None))):
            b.store(ll.Constant(PTR, None), s)
            b.store(i64(0), gep(b, I64, s, i64(1)))
            b.store(i64(0), gep(b, I64, s, i64(2)))
            b.store(i64(1), gep(b, I64, s, i64(STACK_REFS)))
        b.ret(s)
        return fn

    def _define_stack_retain(self) -> ll.Function:
        fn, b = internal_function(self.module, "dlvm.rt.stack_retain", VOID, [PTR])
        (s,) = fn.args
        with b.if_then(b.icmp_unsigned("==", s, ll.Constant(PTR, None)), likely=False):
            b.ret_void()  # an undefined stack
        refs = gep(b, I64, s, i64(STACK_REFS))
        b.store(b.add(b.load(refs, typ=I64), i64(1)), refs)
        b.ret_void()
        return fn

    def _define_stack_release(self) -> ll.Function:
        """Drop a reference; the last one releases the items left and frees the stack."""
        fn, b = internal_function(self.module, "dlvm.rt.stack_release", VOID, [PTR, PTR])
        ctx, s = fn.args
        with b.if_then(b.icmp_unsigned("==", s, ll.Constant(PTR, None)), likely=False):
            b.ret_void()
        refs = gep(b, I64, s, i64(STACK_REFS))
        left = b.sub(b.load(refs, typ=I64), i64(1))
        b.store(left, refs)
        with b.if_then(b.icmp_signed("==", left, i64(0))):
            b.call(self.get("stack_clear"), [ctx, s])
            b.call(self.libc("free"), [b.load(s, typ=PTR)])
            b.call(self.libc("free"), [s])
        b.ret_void()
        return fn

    def _define_stack_push(self) -> ll.Function:
        """i32 push(stack, src, size, type id, release fn): 0, or 1 when memory runs out."""
        fn, b = internal_function(self.module, "dlvm.rt.stack_push", I32,
                                  [PTR, PTR, I64, I64, PTR])
        s, src, size, tid, rel = fn.args
        padded = b.and_(b.add(size, i64(7)), i64(~7))
        used = b.load(gep(b, I64, s, i64(1)), typ=I64)
        cap = b.load(gep(b, I64, s, i64(2)), typ=I64)
        need = b.add(used, b.add(padded, i64(TRAILER_BYTES)))
        with b.if_then(b.icmp_signed(">", need, cap)):
            doubled = b.mul(cap, i64(2))
            new_cap = b.select(b.icmp_signed(">", need, doubled), need, doubled)
            new_cap = b.select(b.icmp_signed("<", new_cap, i64(256)), i64(256), new_cap)
            data = b.call(self.libc("realloc"), [b.load(s, typ=PTR), new_cap])
            with b.if_then(b.icmp_unsigned("==", data, ll.Constant(PTR, None))):
                b.ret(i32(1))
            b.store(data, s)
            b.store(new_cap, gep(b, I64, s, i64(2)))
        data = b.load(s, typ=PTR)
        memcpy(b, byte_offset(b, data, used), src, size)
        trailer = byte_offset(b, data, b.add(used, padded))
        b.store(tid, trailer)
        b.store(rel, gep(b, PTR, trailer, i64(1)))
        b.store(need, gep(b, I64, s, i64(1)))
        b.ret(i32(0))
        return fn

    def _define_stack_pop(self) -> ll.Function:
        """i32 pop(stack, dst, size, type id): 0; 1 if empty; 2 if the top has another type
        (its id is stored at `dst`)."""
        fn, b = internal_function(self.module, "dlvm.rt.stack_pop", I32, [PTR, PTR, I64, I64])
        s, dst, size, tid = fn.args
        used = b.load(gep(b, I64, s, i64(1)), typ=I64)
        with b.if_then(b.icmp_signed("==", used, i64(0))):
            b.ret(i32(1))
        data = b.load(s, typ=PTR)
        trailer = byte_offset(b, data, b.sub(used, i64(TRAILER_BYTES)))
        top = b.load(trailer, typ=I64)
        with b.if_then(b.icmp_signed("!=", top, tid)):
            b.store(top, dst)
            b.ret(i32(2))
        padded = b.and_(b.add(size, i64(7)), i64(~7))
        start = b.sub(b.sub(used, i64(TRAILER_BYTES)), padded)
        memcpy(b, dst, byte_offset(b, data, start), size)
        b.store(start, gep(b, I64, s, i64(1)))
        b.ret(i32(0))
        return fn

    def _define_stack_clear(self) -> ll.Function:
        """`destroyStack`: release every item left on the stack and empty it."""
        fn, b = internal_function(self.module, "dlvm.rt.stack_clear", VOID, [PTR, PTR])
        ctx, s = fn.args
        head = b.append_basic_block("head")
        body = b.append_basic_block("body")
        done = b.append_basic_block("done")
        b.branch(head)
        b.position_at_end(head)
        used = b.load(gep(b, I64, s, i64(1)), typ=I64)
        b.cbranch(b.icmp_signed(">", used, i64(0)), body, done)
        b.position_at_end(body)
        data = b.load(s, typ=PTR)
        trailer = byte_offset(b, data, b.sub(used, i64(TRAILER_BYTES)))
        rel = b.load(gep(b, PTR, trailer, i64(1)), typ=PTR)
        # Every item's release function takes the trailer's address (the item lies just
        # below it), releases the item's references and returns its padded size.
        ftype = ll.FunctionType(I64, [PTR, PTR])
        padded = call_pointer(b, rel, ftype, [ctx, trailer])
        b.store(b.sub(b.sub(used, i64(TRAILER_BYTES)), padded), gep(b, I64, s, i64(1)))
        b.branch(head)
        b.position_at_end(done)
        b.ret_void()
        return fn

    # ------------------------------------------------------------ memory blocks

    def _define_block_retain(self) -> ll.Function:
        fn, b = internal_function(self.module, "dlvm.rt.block_retain", VOID, [PTR],
                                  inline=True)
        (block,) = fn.args
        with b.if_then(b.icmp_unsigned("==", block, ll.Constant(PTR, None)), likely=False):
            b.ret_void()  # a null pointer
        refs = gep(b, I64, block, i64(BLOCK_REFS))
        count = b.load(refs, typ=I64)
        with b.if_then(b.icmp_signed(">", count, i64(0)), likely=True):
            b.store(b.add(count, i64(1)), refs)
        b.ret_void()
        return fn

    def _define_block_release(self) -> ll.Function:
        """Drop a pointer's reference; the last one releases what the cells hold (unless
        `deallocate` did) and returns the block to the pool."""
        fn, b = internal_function(self.module, "dlvm.rt.block_release", VOID, [PTR, PTR])
        ctx, block = fn.args
        with b.if_then(b.icmp_unsigned("==", block, ll.Constant(PTR, None)), likely=False):
            b.ret_void()
        refs = gep(b, I64, block, i64(BLOCK_REFS))
        count = b.load(refs, typ=I64)
        with b.if_then(b.icmp_signed("<=", count, i64(0)), likely=False):
            b.ret_void()  # a box's block or a global's cell
        left = b.sub(count, i64(1))
        b.store(left, refs)
        with b.if_then(b.icmp_signed("==", left, i64(0))):
            self.free_cells(b, ctx, block)
            b.call(self.get("free_buffer"), [ctx, block])
        b.ret_void()
        return fn

    def free_cells(self, b: ll.IRBuilder, ctx: ll.Value, block: ll.Value) -> None:
        """Mark a block freed and release what its cells hold (once)."""
        freed = gep(b, I64, block, i64(BLOCK_FREED))
        with b.if_then(b.icmp_signed("==", b.load(freed, typ=I64), i64(0))):
            b.store(i64(1), freed)
            release = b.load(gep(b, PTR, block, i64(BLOCK_RELEASE_CELLS)), typ=PTR)
            with b.if_then(b.icmp_unsigned("!=", release, ll.Constant(PTR, None))):
                call_pointer(b, release, ll.FunctionType(VOID, [PTR, PTR]), [ctx, block])

    def _define_ctx_free(self) -> ll.Function:
        """Give every pooled buffer of a context back to libc (when its executable goes)."""
        fn, b = internal_function(self.module, "dlvm.rt.ctx_free", VOID, [PTR])
        (ctx,) = fn.args
        for cls in range(POOL_CLASSES):
            head_slot = b.bitcast(self.slot(b, ctx, CTX_FREE + cls), PTR)
            loop = b.append_basic_block(f"c{cls}")
            body = b.append_basic_block(f"c{cls}.free")
            done = b.append_basic_block(f"c{cls}.done")
            b.branch(loop)
            b.position_at_end(loop)
            head = b.load(head_slot, typ=PTR)
            b.cbranch(b.icmp_unsigned("!=", head, ll.Constant(PTR, None)), body, done)
            b.position_at_end(body)
            b.store(b.load(gep(b, PTR, head, i64(2)), typ=PTR), head_slot)
            b.call(self.libc("free"), [head])
            b.branch(loop)
            b.position_at_end(done)
        b.ret_void()
        return fn

    def export_helpers(self, prefix: str) -> dict[str, str]:
        """Functions Python calls besides entries: free a context's pool, release a buffer."""
        names = {"ctx_free": f"{prefix}.ctx_free", "release": f"{prefix}.release"}
        fn = ll.Function(self.module, ll.FunctionType(VOID, [PTR]), names["ctx_free"])
        b = ll.IRBuilder(fn.append_basic_block())
        b.call(self.get("ctx_free"), list(fn.args))
        b.ret_void()
        fn = ll.Function(self.module, ll.FunctionType(VOID, [PTR, PTR]), names["release"])
        b = ll.IRBuilder(fn.append_basic_block())
        b.call(self.get("release"), list(fn.args))
        b.ret_void()
        return names
