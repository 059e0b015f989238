"""Indexing with indices known only at run time: gathers, scatters and one-hot encodings, composed
from comparisons with index ranges so that they differentiate.
"""

from __future__ import annotations
