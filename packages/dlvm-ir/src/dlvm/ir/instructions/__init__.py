"""The built-in instruction set; importing this package registers it."""

from . import aggregate, broadcasting, control, elementwise, memory, tensor

__all__ = ["aggregate", "broadcasting", "control", "elementwise", "memory", "tensor"]
