"""Why a node is not imported: it has no conversion (`Unsupported`), or it breaks ONNX's rules
(`Invalid`). Both are collected for every node of a model, then reported at once, one line
a node."""

from __future__ import annotations


class Unsupported(Exception):
    """This node, or one of its attributes, has no conversion."""


class TooLarge(Unsupported):
    """Evaluating this node at import would make a constant too large to hold."""


class Invalid(Exception):
    """The model breaks ONNX's rules at this node, as ONNX Runtime would refuse it."""
