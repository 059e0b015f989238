"""The driver's half of dynamic loss scaling (`train.precision = "f16"`): the factor the
`loss-scaling` pass makes the step take, halved after a step whose gradients overflowed
(the step skipped its update) and doubled after `interval` good steps in a row, as PyTorch's
`GradScaler` does."""

from __future__ import annotations

from dataclasses import dataclass

# The seed the f16 backward pass starts from is an f16: 2^15 is the largest power of two it
# holds, so a larger factor could only overflow.
LARGEST = 2.0**15
SMALLEST = 2.0**-24  # below it every step overflows: the training has diverged


@dataclass
class DynamicLossScale:
    scale: float = LARGEST
    interval: int = 200  # good steps before the factor doubles
    good: int = 0  # good steps since the last change
    skipped: int = 0  # steps skipped since `take_skipped`

    def update(self, finite: bool) -> None:
        """After a step: whether its gradients were finite (the step was taken)."""
        if finite:
            self.good += 1
            if self.good >= self.interval:
                self.scale, self.good = min(self.scale * 2.0, LARGEST), 0
            return
        self.skipped += 1
        self.scale, self.good = self.scale / 2.0, 0

    @property
    def diverged(self) -> bool:
        return self.scale < SMALLEST

    def take_skipped(self) -> int:
        """The steps skipped since the last call (an epoch's, for its metrics record)."""
        count, self.skipped = self.skipped, 0
        return count
