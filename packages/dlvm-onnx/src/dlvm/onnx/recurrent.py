"""Recurrent operators (RNN, GRU, LSTM) lowered to IR loops, so they differentiate through time."""

from __future__ import annotations
