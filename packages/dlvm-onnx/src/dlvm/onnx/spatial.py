"""Spatial and layout operators: padding, resizing, transposed convolution, pooling variants,
rearrangements, and tensors made from shapes.
"""

from __future__ import annotations
