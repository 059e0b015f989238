"""Writes sequences.npz, the task of this example: a majority vote. Each sequence has 15
steps of two features: a vote, −1 or +1, and noise the model must learn to ignore; the label
is 1 when the +1 votes win. `python generate.py` makes the same file every time (seed 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

COUNT, STEPS = 2000, 15


def main() -> None:
    rng = np.random.default_rng(0)
    signal = rng.choice(np.array([-1.0, 1.0], np.float32), size=(COUNT, STEPS))
    noise = rng.normal(0.0, 1.0, size=(COUNT, STEPS)).astype(np.float32)
    sequences = np.stack([signal, noise], axis=2)  # batch × time × features
    labels = (signal.sum(axis=1) > 0).astype(np.int64)
    np.savez(Path(__file__).with_name("sequences.npz"), sequences=sequences, labels=labels)


if __name__ == "__main__":
    main()
