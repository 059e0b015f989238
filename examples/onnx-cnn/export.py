"""Writes cnn.onnx, the model this example fine-tunes: a small CNN for the 8×8 digits,
exported by PyTorch (`pip install torch==2.13.0`, then `python export.py`; seed 0, so the
file is the same each time). It takes a batch of flat images [batch x 64], as the dataset
stores them, and returns class scores [batch x 10]. Its weights are PyTorch's random
initialization: `dlvm run pipeline.toml` trains them from there."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(-1, 1, 8, 8)
        x = nn.functional.max_pool2d(torch.relu(self.norm(self.conv1(x))), 2)
        x = torch.relu(self.conv2(x))
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def main() -> None:
    torch.manual_seed(0)
    model = DigitsCNN().eval()
    with torch.no_grad():  # running statistics of pixels scaled to 0..1
        model.norm.running_mean.uniform_(-0.1, 0.1)
        model.norm.running_var.uniform_(0.5, 1.5)
    torch.onnx.export(model, (torch.zeros(2, 64),), Path(__file__).with_name("cnn.onnx"),
                      input_names=["x"], output_names=["scores"], opset_version=18,
                      dynamic_axes={"x": {0: "batch"}, "scores": {0: "batch"}},
                      do_constant_folding=False, dynamo=False)


if __name__ == "__main__":
    main()
