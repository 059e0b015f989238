"""The CUDA runtime layer: device probing, memory, modules, launches, cuBLAS and DLPack.

Without a GPU: the probe reports why in one line, the device refuses to start with the same
reason, cuBLAS loads or says why, and DLPack export/import is checked on a device whose
memory is host memory (numpy then consumes and produces the capsules). Tests marked `gpu`
run the real thing.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from dlvm.llvm_gpu import cublas, cuda, dlpack
from dlvm.llvm_gpu.device import Buffer, Device, DeviceArray, GPUError, KernelArg


@pytest.fixture(scope="module", autouse=True)
def collections_see_only_these_tests() -> Iterator[None]:
    """The tests here call `gc.collect()` to see buffers released. In a long test run the
    process holds hundreds of thousands of objects, and each full collection would walk them
    all (~0.4 s); frozen, they are skipped, and what these tests make is still collected."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


# ---------------------------------------------------------------- a device in host memory


class HostMemoryDevice(Device):
    """Memory from numpy (kept alive in a dict by address), kernels as Python callables:
    enough of a device to test what DLPack does with buffers' lifetimes."""

    name = "host-memory"
    arch = "host"

    def __init__(self) -> None:
        self.arrays: dict[int, np.ndarray] = {}
        self.released: list[int] = []

    def allocate(self, nbytes: int) -> Buffer:
        backing = np.empty(max(nbytes, 1), np.uint8)
        self.arrays[backing.ctypes.data] = backing
        return Buffer(self, backing.ctypes.data, backing.nbytes)

    def release(self, ptr: int, nbytes: int) -> None:
        self.released.append(ptr)
        del self.arrays[ptr]

    def upload(self, array: np.ndarray) -> DeviceArray:
        host = np.asarray(array, order="C")
        out = self.empty(host.shape, host.dtype)
        ctypes.memmove(out.ptr, host.ctypes.data, host.nbytes)
        return out

    def download(self, array: DeviceArray) -> np.ndarray:
        out = np.empty(array.shape, array.dtype)
        ctypes.memmove(out.ctypes.data, array.ptr, out.nbytes)
        return out

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def fill_zero(self, ptr: int, nbytes: int) -> None:
        ctypes.memset(ptr, 0, nbytes)

    def load(self, code: dict[str, Callable[..., None]], kernels: list[str]) -> dict[str, Any]:
        return {name: code[name] for name in kernels}

    def launch(self, kernel: Any, grid: int, block: int, shared: int,
               args: list[KernelArg]) -> None:
        kernel(grid, block, *[arg.value for arg in args])

    def synchronize(self) -> None:
        pass

    def backing(self, array: DeviceArray) -> np.ndarray:
        return self.arrays[array.buffer.ptr]


DTYPES = [np.float32, np.float64, np.int32, np.bool_]
SHAPES = [(), (3,), (2, 3, 4)]


def sample(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    values = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.float64).reshape(shape)
    return (values % 2 == 1) if dtype is np.bool_ else (values * 1.5 - 2).astype(dtype)


# ---------------------------------------------------------------- without a GPU


def test_available_never_raises_and_is_one_line() -> None:
    ok, why = cuda.available()
    assert isinstance(ok, bool) and isinstance(why, str) and why
    assert "\n" not in why
    assert cuda.available() == (ok, why)  # cached
    ok_far, why_far = cuda.available(64)
    assert not ok_far and "\n" not in why_far


def test_device_refuses_with_the_probe_reason() -> None:
    ok, why = cuda.available()
    if ok:
        pytest.skip(f"a CUDA device is present ({why})")
    with pytest.raises(GPUError) as info:
        cuda.CudaDevice()
    assert str(info.value) == why


def test_cublas_loads_or_says_why() -> None:
    blas = cublas.load()
    if blas is None:
        assert cublas.reason().startswith("cuBLAS cannot be loaded")
    else:
        assert isinstance(blas, cublas.Cublas) and blas.path
        assert cublas.reason() == ""
    assert cublas.status_name(7) == "CUBLAS_STATUS_INVALID_VALUE"
    assert "42" in cublas.status_name(42)


def test_dlpack_struct_layouts() -> None:
    # sizes and offsets of dlpack.h on a 64-bit platform
    assert ctypes.sizeof(dlpack.DLDevice) == 8 and ctypes.sizeof(dlpack.DLDataType) == 4
    assert ctypes.sizeof(dlpack.DLTensor) == 48
    assert dlpack.DLTensor.shape.offset == 24 and dlpack.DLTensor.byte_offset.offset == 40
    assert ctypes.sizeof(dlpack.DLManagedTensor) == 64
    assert dlpack.DLManagedTensorVersioned.flags.offset == 24
    assert dlpack.DLManagedTensorVersioned.dl_tensor.offset == 32


@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_dlpack_export_to_numpy_is_zero_copy(dtype: Any, shape: tuple[int, ...],
                                             versioned: bool) -> None:
    device = HostMemoryDevice()
    host = sample(shape, dtype)
    array = device.upload(host)
    backing = device.backing(array)
    view = np.from_dlpack(array if versioned else _LegacyProducer(array))
    assert view.dtype == host.dtype and view.shape == host.shape
    np.testing.assert_array_equal(view, host)
    assert np.shares_memory(view, backing)

    # the view keeps the memory: deleting the DeviceArray returns nothing to the pool
    del array
    gc.collect()
    assert device.released == []
    np.testing.assert_array_equal(view, host)
    del view
    gc.collect()
    assert len(device.released) == 1
    assert not dlpack._EXPORTED


class _LegacyProducer:
    """A producer from before DLPack 1.0: no max_version, a "dltensor" capsule."""

    def __init__(self, array: DeviceArray) -> None:
        self.array = array

    def __dlpack__(self, stream: Any = None) -> Any:
        return dlpack.export(self.array, stream=stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.array.__dlpack_device__()


def test_dlpack_capsule_never_consumed_is_freed() -> None:
    device = HostMemoryDevice()
    array = device.upload(np.arange(5, dtype=np.float32))
    for version in (None, (1, 0)):
        capsule = array.__dlpack__(max_version=version)
        assert dlpack._EXPORTED
        del capsule
        gc.collect()
        assert not dlpack._EXPORTED
    del array
    gc.collect()
    assert len(device.released) == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_dlpack_import_of_a_host_array_on_a_host_device(dtype: Any) -> None:
    device = HostMemoryDevice()
    host = sample((2, 3, 4), dtype)
    array = dlpack.import_array(host, device)
    assert array is not None
    assert array.ptr == host.ctypes.data and array.shape == host.shape
    np.testing.assert_array_equal(array.numpy(), host)
    assert isinstance(array.buffer, dlpack.ForeignBuffer)
    del array
    gc.collect()
    assert device.released == []  # foreign memory never enters the pool


def test_dlpack_round_trip_through_our_own_capsule() -> None:
    device = HostMemoryDevice()
    original = device.upload(np.arange(12, dtype=np.float64).reshape(3, 4))
    again = dlpack.import_array(original, device)
    assert again is not None and again.ptr == original.ptr
    del original
    gc.collect()
    assert device.released == [] and dlpack._EXPORTED  # the import holds the export
    np.testing.assert_array_equal(again.numpy(), np.arange(12.0).reshape(3, 4))
    del again
    gc.collect()
    assert len(device.released) == 1 and not dlpack._EXPORTED


def test_dlpack_import_rules() -> None:
    device = HostMemoryDevice()
    assert dlpack.import_array([1, 2, 3], device) is None  # no DLPack at all
    sliced = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    with pytest.raises(GPUError, match="not C-contiguous"):
        dlpack.import_array(sliced, device)
    # size-1 dimensions may carry any stride
    column = np.arange(4, dtype=np.float32).reshape(4, 1)[:, :1]
    imported = dlpack.import_array(column, device)
    assert imported is not None and imported.shape == (4, 1)

    class OnGPU:
        name = "gpu"

        def dlpack_device(self) -> tuple[int, int]:
            return (2, 0)

    # a host array headed for a GPU device: the caller uploads it
    assert dlpack.import_array(np.zeros(3), OnGPU()) is None  # type: ignore[arg-type]

    class Elsewhere:
        def __dlpack__(self, **kwargs: Any) -> Any:
            raise AssertionError("must not be asked for a capsule")

        def __dlpack_device__(self) -> tuple[int, int]:
            return (2, 1)

    with pytest.raises(GPUError, match="cannot be used"):
        dlpack.import_array(Elsewhere(), OnGPU())  # type: ignore[arg-type]


def test_dlpack_rejects_types_it_cannot_spell() -> None:
    with pytest.raises(BufferError):
        dlpack.dtype_to_dlpack(np.dtype("U3"))
    assert dlpack.dtype_from_dlpack(dlpack.dtype_to_dlpack(np.dtype(np.uint16))) == np.uint16
    with pytest.raises(GPUError):
        dlpack.dtype_from_dlpack(dlpack.DLDataType(dlpack.KDL_BFLOAT, 16, 1))


# ---------------------------------------------------------------- on a GPU

ADD_ONE_PTX = """\
.version 7.8
.target sm_80
.address_size 64

.visible .entry add_one(
    .param .u64 add_one_data,
    .param .u64 add_one_n
)
{
    .reg .pred  %p<2>;
    .reg .b32   %r<5>;
    .reg .f32   %f<3>;
    .reg .b64   %rd<7>;

    ld.param.u64        %rd1, [add_one_data];
    ld.param.u64        %rd2, [add_one_n];
    mov.u32             %r1, %ctaid.x;
    mov.u32             %r2, %ntid.x;
    mov.u32             %r3, %tid.x;
    mad.lo.s32          %r4, %r1, %r2, %r3;
    cvt.u64.u32         %rd3, %r4;
    setp.ge.u64         %p1, %rd3, %rd2;
    @%p1 bra            DONE;
    cvta.to.global.u64  %rd4, %rd1;
    shl.b64             %rd5, %rd3, 2;
    add.s64             %rd6, %rd4, %rd5;
    ld.global.f32       %f1, [%rd6];
    add.f32             %f2, %f1, 0f3F800000;
    st.global.f32       [%rd6], %f2;
DONE:
    ret;
}
"""

BAD_PTX = """\
.version 7.8
.target sm_80
.address_size 64

.visible .entry broken()
{
    frobnicate.f32 %f1, %f2;
    ret;
}
"""


@pytest.fixture(scope="module")
def gpu() -> cuda.CudaDevice:
    ok, why = cuda.available()
    if not ok:
        pytest.skip(why)
    return cuda.CudaDevice()


@pytest.mark.gpu
def test_gpu_identity(gpu: cuda.CudaDevice) -> None:
    assert gpu.name == cuda.available()[1]
    assert gpu.arch.startswith("sm_") and gpu.arch[3:].isdigit()
    assert gpu.dlpack_device() == (2, 0) and gpu.stream_handle != 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_,
                                   np.float16, np.uint8])
def test_gpu_round_trip(gpu: cuda.CudaDevice, dtype: Any) -> None:
    host = sample((3, 5, 7), dtype)
    array = gpu.upload(host)
    assert array.shape == host.shape and array.dtype == host.dtype
    np.testing.assert_array_equal(array.numpy(), host)
    # a non-contiguous source is made contiguous first
    np.testing.assert_array_equal(gpu.upload(host[:, ::2]).numpy(), host[:, ::2])
    # device-to-device copy and zero fill
    other = gpu.empty(host.shape, host.dtype)
    gpu.copy(other.ptr, array.ptr, array.nbytes)
    np.testing.assert_array_equal(other.numpy(), host)
    gpu.fill_zero(other.ptr, other.nbytes)
    np.testing.assert_array_equal(other.numpy(), np.zeros_like(host))
    scalar = gpu.upload(np.array(3, dtype=dtype))
    np.testing.assert_array_equal(scalar.numpy(), np.array(3, dtype=dtype))


@pytest.mark.gpu
def test_gpu_pool_reuses_memory(gpu: cuda.CudaDevice) -> None:
    buffer = gpu.allocate(1000)
    assert buffer.nbytes == 1024
    ptr = buffer.ptr
    del buffer
    gc.collect()
    again = gpu.allocate(1000)
    assert again.ptr == ptr
    other = gpu.allocate(1000)  # the free list is empty again: fresh memory
    assert other.ptr != ptr


@pytest.mark.gpu
def test_gpu_launch_hand_written_ptx(gpu: cuda.CudaDevice) -> None:
    kernels = gpu.load(ADD_ONE_PTX, ["add_one"])
    assert gpu.load(ADD_ONE_PTX, ["add_one"])["add_one"] is kernels["add_one"]  # cached
    host = np.linspace(-3, 3, 1000, dtype=np.float32)
    array = gpu.upload(host)
    block = 128
    grid = (host.size + block - 1) // block
    args = [KernelArg(ctypes.c_void_p, array.ptr), KernelArg(ctypes.c_uint64, host.size)]
    gpu.launch(kernels["add_one"], grid, block, 0, args)
    gpu.synchronize()
    np.testing.assert_array_equal(array.numpy(), host + np.float32(1))


@pytest.mark.gpu
def test_gpu_bad_ptx_reports_the_jit_log(gpu: cuda.CudaDevice) -> None:
    with pytest.raises(GPUError) as info:
        gpu.load(BAD_PTX, ["broken"])
    message = str(info.value)
    assert "cuModuleLoadDataEx" in message and "JIT log:" in message
    log = message.split("JIT log:", 1)[1]
    assert "ptx" in log.lower() or "line" in log.lower()


@pytest.mark.gpu
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gpu_gemm_matches_numpy(gpu: cuda.CudaDevice, trans_a: bool, trans_b: bool) -> None:
    m, n, k = 5, 7, 3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    da, db, dc = gpu.upload(a), gpu.upload(b), gpu.empty((m, n), np.float32)
    done = gpu.gemm(np.dtype(np.float32), trans_a, trans_b, m, n, k,
                    da.ptr, a.shape[1], db.ptr, b.shape[1], dc.ptr, n)
    if not done:
        pytest.skip(f"no cuBLAS: {gpu.blas_reason}")
    expected = (a.T if trans_a else a) @ (b.T if trans_b else b)
    np.testing.assert_allclose(dc.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert not gpu.gemm(np.dtype(np.int32), False, False, m, n, k,
                        da.ptr, k, db.ptr, n, dc.ptr, n)


@pytest.mark.gpu
def test_gpu_dlpack_with_torch(gpu: cuda.CudaDevice) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    array = gpu.upload(host)
    tensor = torch.from_dlpack(array)
    assert tensor.device.type == "cuda" and tensor.data_ptr() == array.ptr
    np.testing.assert_array_equal(tensor.cpu().numpy(), host)
    del array
    gc.collect()
    np.testing.assert_array_equal(tensor.cpu().numpy(), host)

    source = torch.arange(6, dtype=torch.float64, device="cuda").reshape(2, 3)
    imported = dlpack.import_array(source, gpu)
    assert imported is not None and imported.ptr == source.data_ptr()
    np.testing.assert_array_equal(imported.numpy(), np.arange(6.0).reshape(2, 3))
    with pytest.raises(GPUError, match="not C-contiguous"):
        dlpack.import_array(source.t(), gpu)
