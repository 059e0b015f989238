"""The digits MLP of examples/digits-mlp, written in NNKit: 64-32-10, tanh, softmax
cross-entropy, trained with Adam.

`dlvm run examples/nnkit-mlp/pipeline.toml` reads this file through the `nnkit` front end
(its staged functions `loss`, `predict` and `train_step` become the module);
`python examples/nnkit-mlp/train.py` trains the same program from Python.
"""

from dlvm import nnkit as nn
from dlvm.nnkit import Tensor, f32

model = nn.Sequential([
    nn.Dense(64, 32, nn.tanh, name="dense1"),
    nn.Dense(32, 10, name="dense2"),
])
program = nn.training(model, nn.cross_entropy, nn.Adam(),
                      inputs=Tensor[f32, (None, 64)], targets=Tensor[f32, (None, 10)])

loss = program.loss
predict = program.predict
train_step = program.step
evaluate = program.evaluate  # predict with Adam's state as arguments, for dlvm run
