"""The complete opcode table `LOWER`: importing this module imports every module that adds
DLVM's own rules to it (`function.py` defines the table; `kernel.py` and the `lower_*`
modules fill it). Whatever lowers a function imports the table from here."""

from __future__ import annotations

from . import kernel, lower_aggregate, lower_control, lower_memory, lower_tensor
from .function import LOWER

del kernel, lower_aggregate, lower_control, lower_memory, lower_tensor

__all__ = ["LOWER"]
