"""DLPack both ways: device arrays shared with torch, cupy, JAX or numpy without a copy.

The C structures are spelled out with ctypes, so no extension module is needed. A capsule
that leaves (`export`) holds a reference to its `DeviceArray`, and so to the pool `Buffer`
under it, in a module-level registry until the consumer calls the managed tensor's deleter
(or, for a capsule nobody consumed, until the capsule itself is freed). A capsule that comes
in (`import_array`) is wrapped in a `Buffer` that never goes back to a pool: when it dies it
calls the producer's deleter instead.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any

import numpy as np

from .device import Buffer, Device, DeviceArray, GPUError

# DLDeviceType
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
# DLDataTypeCode
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT, KDL_COMPLEX, KDL_BOOL = 0, 1, 2, 4, 5, 6
# DLManagedTensorVersioned.flags
FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2

_NAME = b"dltensor"
_NAME_VERSIONED = b"dltensor_versioned"
_USED = b"used_dltensor"
_USED_VERSIONED = b"used_dltensor_versioned"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


# void (*deleter)(DLManagedTensor*): the argument is taken as a plain address
Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", Deleter)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Python's capsule API, through prototypes of our own so that other users of
# ctypes.pythonapi (which set argtypes on its shared function objects) cannot clash.
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 _CapsuleDestructor)(("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))
# the capsule destructor runs while the capsule is being freed: it must not touch the
# capsule as a Python object (no reference counting), so these take its raw address
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

# address of an exported managed tensor -> everything that must outlive it: the structure
# itself, its shape and strides, and the DeviceArray whose memory it lends
_EXPORTED: dict[int, tuple[Any, ...]] = {}


def _delete_exported(address: int | None) -> None:
    """The deleter of every exported tensor: drop what kept its memory alive."""
    if address and _EXPORTED is not None:
        _EXPORTED.pop(address, None)


def _destroy_capsule(capsule: int | None) -> None:
    """A capsule freed unconsumed (still named "dltensor…") owns its tensor."""
    try:
        for name in (_NAME_VERSIONED, _NAME):
            if _raw_is_valid(capsule, name):
                _delete_exported(_raw_get_pointer(capsule, name))
                return
    except Exception:  # nothing may escape a destructor (and at exit, modules are going)
        pass


_DELETER = Deleter(_delete_exported)
_DESTRUCTOR = _CapsuleDestructor(_destroy_capsule)


def dtype_to_dlpack(dtype: np.dtype[Any]) -> DLDataType:
    dtype = np.dtype(dtype)
    code = {"b": KDL_BOOL, "i": KDL_INT, "u": KDL_UINT, "f": KDL_FLOAT,
            "c": KDL_COMPLEX}.get(dtype.kind)
    if code is None or dtype.byteorder == ">":
        raise BufferError(f"DLPack has no type for {dtype}")
    return DLDataType(code, dtype.itemsize * 8, 1)


def dtype_from_dlpack(dtype: DLDataType) -> np.dtype[Any]:
    kinds = {KDL_BOOL: "b", KDL_INT: "i", KDL_UINT: "u", KDL_FLOAT: "f", KDL_COMPLEX: "c"}
    kind = kinds.get(dtype.code)
    if kind is None or dtype.lanes != 1 or dtype.bits % 8:
        raise GPUError(f"unsupported DLPack dtype (code {dtype.code}, bits {dtype.bits}, "
                       f"lanes {dtype.lanes})")
    if kind == "b":
        if dtype.bits != 8:
            raise GPUError(f"unsupported DLPack bool of {dtype.bits} bits")
        return np.dtype(np.bool_)
    try:
        return np.dtype(f"{kind}{dtype.bits // 8}")
    except TypeError as exc:
        raise GPUError(f"unsupported DLPack dtype {kind}{dtype.bits}") from exc


def _row_major_strides(shape: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return strides[::-1]


def export(array: DeviceArray, *, stream: Any = None, max_version: Any = None) -> Any:
    """A DLPack capsule lending `array`'s memory: "dltensor_versioned" (DLPack 1.0) when the
    consumer accepts `max_version` >= (1, 0), else the legacy "dltensor"."""
    device_type, device_id = array.device.dlpack_device()
    if device_type in (KDL_CUDA, KDL_CUDA_MANAGED) and stream != -1:
        # the consumer will read on its own stream (None: the legacy default stream);
        # finishing every pending write first orders it before any consumer stream
        array.device.synchronize()
    ndim = array.ndim
    shape = (ctypes.c_int64 * max(ndim, 1))(*array.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*_row_major_strides(array.shape))
    tensor = DLTensor(
        data=array.ptr, device=DLDevice(device_type, device_id), ndim=ndim,
        dtype=dtype_to_dlpack(array.dtype),
        shape=ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
        strides=ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)), byte_offset=0)
    managed: DLManagedTensor | DLManagedTensorVersioned
    if max_version is not None and int(max_version[0]) >= 1:
        managed = DLManagedTensorVersioned(version=DLPackVersion(1, 0), manager_ctx=None,
                                           deleter=_DELETER, flags=0, dl_tensor=tensor)
        name = _NAME_VERSIONED
    else:
        managed = DLManagedTensor(dl_tensor=tensor, manager_ctx=None, deleter=_DELETER)
        name = _NAME
    address = ctypes.addressof(managed)
    _EXPORTED[address] = (managed, shape, strides, array)
    try:
        return _capsule_new(address, name, _DESTRUCTOR)
    except BaseException:
        _EXPORTED.pop(address, None)
        raise


class ForeignBuffer(Buffer):
    """Memory another library lent through DLPack: never pooled; when it dies, the
    producer's deleter runs (and the producer's object is let go)."""

    __slots__ = ("_managed", "owner", "readonly")

    def __init__(self, device: Device, ptr: int, nbytes: int, owner: Any, managed: Any,
                 readonly: bool) -> None:
        super().__init__(device, ptr, nbytes)
        self.owner = owner
        self._managed = managed
        self.readonly = readonly

    def __del__(self) -> None:
        managed = getattr(self, "_managed", None)
        self._managed = None
        self.owner = None
        if managed is not None and managed.deleter:
            # a producer at interpreter exit may be gone already
            with contextlib.suppress(Exception):
                managed.deleter(ctypes.addressof(managed))


def _take_capsule(obj: Any, stream: int | None) -> tuple[Any, bool]:
    """The object's capsule (versioned when the producer knows DLPack 1.0)."""
    try:
        return obj.__dlpack__(stream=stream, max_version=(1, 0)), True
    except TypeError:  # a producer older than DLPack 1.0 takes no max_version
        return obj.__dlpack__(stream=stream), False


def import_array(obj: Any, device: Device) -> DeviceArray | None:
    """`obj`'s memory as a DeviceArray of `device`, without a copy, when `obj` speaks DLPack
    and lives where `device` computes; None for host arrays on a GPU device (and for objects
    without DLPack), which the caller uploads instead."""
    if not (hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")):
        return None
    source = tuple(int(x) for x in obj.__dlpack_device__())
    target = tuple(device.dlpack_device())
    if source != target:
        if source[0] == KDL_CPU:
            return None
        raise GPUError(f"a DLPack array on device {source} cannot be used on "
                       f"{device.name} {target} without a copy")
    stream = getattr(device, "stream_handle", None)
    capsule, _ = _take_capsule(obj, int(stream) if stream is not None else None)
    if _capsule_is_valid(capsule, _NAME_VERSIONED):
        address = _capsule_get_pointer(capsule, _NAME_VERSIONED)
        managed: Any = DLManagedTensorVersioned.from_address(address)
        if (managed.version.major, managed.version.minor) < (1, 0) or managed.version.major > 1:
            raise GPUError(f"unsupported DLPack version {managed.version.major}."
                           f"{managed.version.minor}")
        readonly = bool(managed.flags & FLAG_READ_ONLY)
        used = _USED_VERSIONED
    elif _capsule_is_valid(capsule, _NAME):
        address = _capsule_get_pointer(capsule, _NAME)
        managed = DLManagedTensor.from_address(address)
        readonly = False
        used = _USED
    else:
        raise GPUError("__dlpack__ returned no unconsumed DLPack capsule")
    # ours from here on: the producer's capsule destructor no longer frees the tensor
    _capsule_set_name(capsule, used)
    tensor = managed.dl_tensor
    try:
        ndim = int(tensor.ndim)
        shape = tuple(int(tensor.shape[i]) for i in range(ndim))
        dtype = dtype_from_dlpack(tensor.dtype)
        if tensor.strides and any(
                extent > 1 and int(tensor.strides[i]) != step
                for i, (extent, step) in enumerate(zip(shape, _row_major_strides(shape),
                                                       strict=True))):
            strides = tuple(int(tensor.strides[i]) for i in range(ndim))
            raise GPUError(f"a DLPack array of shape {shape} with strides {strides} "
                           "(elements) is not C-contiguous; pass a contiguous copy")
    except BaseException:
        if managed.deleter:
            managed.deleter(address)
        raise
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    offset = int(tensor.byte_offset)
    buffer = ForeignBuffer(device, int(tensor.data or 0), offset + nbytes, obj, managed,
                           readonly)
    return DeviceArray(buffer, shape, dtype, offset)
