"""The model library: layers against numpy, optimizers' updates against their formulas, and
the NNKit digits example reaching the `.dl` example's accuracy through `dlvm run`."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlvm import nnkit as nn
from dlvm.ad.testing import central_difference
from dlvm.nnkit import Tensor, f64

ROOT = Path(__file__).resolve().parents[3]
RNG = np.random.default_rng(3)


def test_dense_and_sequential_compute_as_numpy() -> None:
    model = nn.Sequential([nn.Dense(4, 3, nn.tanh, name="a", dtype=f64),
                           nn.Dense(3, 2, name="b", dtype=f64)])
    assert [n for n, _ in model.parameters()] == ["a_w", "a_b", "b_w", "b_b"]
    params = model.init(RNG)
    params["a_b"] = RNG.standard_normal(3)
    names = [n for n, _ in model.parameters()]
    fn = nn.lambda_(lambda *args: model(dict(zip(names, args[:-1], strict=True)), args[-1]),
                    [s for _, s in model.parameters()] + [Tensor[f64, 2]])
    x = RNG.standard_normal((5, 4))
    want = np.tanh(x @ params["a_w"] + params["a_b"]) @ params["b_w"] + params["b_b"]
    np.testing.assert_allclose(fn(*(params[n] for n in names), x), want, rtol=1e-12)


@pytest.mark.parametrize("optimizer", [nn.SGD(), nn.SGD(momentum=0.9), nn.Adam()],
                         ids=["sgd", "momentum", "adam"])
def test_optimizers_follow_their_update_rules(optimizer: object) -> None:
    model = nn.Dense(3, 2, name="d", dtype=f64)
    program = nn.training(model, lambda out, y: nn.mean(nn.square(out - y)), optimizer,
                          inputs=Tensor[f64, 2], targets=Tensor[f64, 2])
    values = program.init(RNG)
    x, y = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 2))
    w, b = values["d_w"].copy(), values["d_b"].copy()
    loss = program.train_step(values, x, y, 0.1)
    out = x @ w + b
    np.testing.assert_allclose(loss, ((out - y) ** 2).mean(), rtol=1e-12)
    gw = x.T @ (2 * (out - y) / out.size)
    if isinstance(optimizer, nn.Adam):
        m, v = 0.1 * gw, 0.001 * gw * gw
        step = (m / (1 - 0.9)) / (np.sqrt(v / (1 - 0.999)) + 1e-8)
        np.testing.assert_allclose(values["d_w_m"], m, rtol=1e-10)
        np.testing.assert_allclose(values["adam_t"], 1.0)
    else:
        step = gw  # the first step of momentum SGD is plain SGD's
    np.testing.assert_allclose(values["d_w"], w - 0.1 * step, rtol=1e-9, atol=1e-12)


def test_an_rnn_cell_in_a_loop_trains_by_backpropagation_through_time() -> None:
    cell = nn.RNNCell(2, 3, dtype=f64)
    names = [n for n, _ in cell.parameters()]

    def loss(*args: object) -> object:
        p = dict(zip(names, args[:3], strict=True))
        xs, h0, n = args[3], args[4], args[5]
        h = nn.fori_loop(0, n, lambda t, h: cell(p, nn.take(xs, t), h), h0)
        return nn.sum(h * h)

    staged = nn.lambda_(loss, [s for _, s in cell.parameters()] +
                        [Tensor[f64, 3], Tensor[f64, 2], Tensor[nn.i64, 0]])
    params = cell.init(RNG)
    xs, h0 = RNG.standard_normal((4, 1, 2)), RNG.standard_normal((1, 3))

    def reference(wx: np.ndarray) -> float:
        h = h0
        for t in range(4):
            h = np.tanh(xs[t] @ wx + h @ params["rnn_wh"] + params["rnn_b"])
        return float((h * h).sum())

    grads = nn.gradient(staged, wrt=0)(params["rnn_wx"], params["rnn_wh"], params["rnn_b"],
                                       xs, h0, np.int64(4))
    np.testing.assert_allclose(grads[0], central_difference(reference, params["rnn_wx"]),
                               rtol=1e-5, atol=1e-9)
    assert math.isfinite(float(staged(params["rnn_wx"], params["rnn_wh"], params["rnn_b"],
                                      xs, h0, np.int64(4))))


def test_the_nnkit_digits_example_trains_through_dlvm_run(tmp_path: Path) -> None:
    pipeline = ROOT / "examples" / "nnkit-mlp" / "pipeline.toml"
    done = subprocess.run([sys.executable, "-m", "dlvm.cli", "run", str(pipeline), "--quiet",
                           "--set", f'run.dir="{tmp_path}"'],  # its run folder, not examples/
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    found = re.search(r"test accuracy: ([\d.]+)%", done.stdout + done.stderr)
    assert found is not None, done.stdout
    assert float(found.group(1)) >= 97.21  # the .dl example's accuracy
