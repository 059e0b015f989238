"""The error of the differentiation pass."""

from __future__ import annotations

from dlvm.ir import DlvmError


class DifferentiationError(DlvmError):
    """A function that cannot be differentiated; the message says where and why."""
