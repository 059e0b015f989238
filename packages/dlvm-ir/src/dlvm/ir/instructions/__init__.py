"""The built-in instruction set; importing this package registers it."""

from . import aggregate, control, elementwise, memory, tensor

__all__ = ["aggregate", "control", "elementwise", "memory", "tensor"]
