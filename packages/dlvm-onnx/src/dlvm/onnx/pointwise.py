"""Element-wise operators beyond ops.py's tables: activations, trigonometry, tests, casts and
bitwise operators.
"""

from __future__ import annotations
