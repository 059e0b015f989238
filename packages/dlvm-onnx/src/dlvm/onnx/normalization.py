"""Normalizations and attention."""

from __future__ import annotations
