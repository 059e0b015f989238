"""Reductions, scans, arg-reductions and losses."""

from __future__ import annotations
