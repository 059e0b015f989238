"""The tables and keys of a pipeline TOML file: one table of key specifications.

`docs/pipeline-toml.md` documents the same keys for users; a test keeps the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Key:
    """One key: the TOML types it accepts, whether it is required, and its meaning.

    Every number must also be finite (NaN passes any `minimum`, so it is refused first).
    """

    types: tuple[type, ...]
    help: str
    required: bool = False
    choices: tuple[Any, ...] = ()
    is_path: bool = False  # paths (or arrays of them) relative to the TOML file (an output:
    # to the run folder), refused when the system could not take them (too long, a NUL)
    must_exist: bool = False  # an input file, read before any work
    is_output: bool = False  # a file written into the run folder: checked before any work
    minimum: float | None = None
    items: tuple[type, ...] = ()  # the types of an array's elements


STR, INT, NUM, BOOL = (str,), (int,), (int, float), (bool,)
TABLE, ARRAY = (dict,), (list,)

INITS = ("zeros", "normal", "glorot")
METRICS = ("accuracy",)
EMITS = ("ir", "llvm", "ptx")

SCHEMA: dict[str, dict[str, Key]] = {
    "module": {
        "path": Key(STR, "the module: a .dl file or any front end's source", required=True,
                    is_path=True, must_exist=True),
        "frontend": Key(STR, "the front end to read it with (default: by the file's suffix)"),
        "link": Key(ARRAY, "files linked into the module (a loss, a training step…): their "
                    "functions may call the module's, declared extern", items=STR, is_path=True),
    },
    "passes": {
        "pipeline": Key(STR, "pipeline text, e.g. \"differentiation,O2\""),
        "list": Key(ARRAY, "or a list of tables {name = …, options = {…}}", items=TABLE),
    },
    "passes.list": {
        "name": Key(STR, "a registered pass or named pipeline", required=True),
        "options": Key(TABLE, "the pass's options"),
    },
    "target": {
        "name": Key(STR, "a registered target (default: the fastest installed)"),
        "options": Key(TABLE, "the target's options"),
    },
    "emit": {
        "what": Key(STR, "what to write: the optimized IR, LLVM IR or PTX", choices=EMITS),
        "output": Key(STR, "the file to write", required=True, is_path=True, is_output=True),
    },
    "call": {
        "function": Key(STR, "the function to call", required=True),
        "parameters": Key(STR, ".npz whose arrays fill the arguments of the same names",
                          is_path=True, must_exist=True),
        "args": Key(STR + ARRAY, "the other arguments: an .npz of arg0… or a list of "
                    "\"file.npy\" / \"file.npz:array\"", items=STR, is_path=True),
        "output": Key(STR, ".npz to write out0, out1, … to", is_path=True, is_output=True),
    },
    "data": {
        "path": Key(STR, "an .npz holding the dataset", required=True, is_path=True,
                    must_exist=True),
        "inputs": Key(STR, "the array of inputs (one example per row; default \"inputs\")"),
        "labels": Key(STR, "the array of labels (default \"labels\")"),
        "scale": Key(NUM, "inputs are multiplied by this (default 1)"),
        "one_hot": Key(INT, "integer labels become one-hot rows of this many classes",
                       minimum=1),
        "test_fraction": Key(NUM, "the held-out share (default 0.2)", minimum=0),
        "split_seed": Key(INT, "the seed of the train/test split (default 0)", minimum=0),
    },
    "train": {
        "step": Key(STR, "(params…, inputs, targets, learning_rate) -> (params…, loss)",
                    required=True),
        "parameters": Key(ARRAY, "names of the parameters (default: the step's argument "
                          "names)", items=STR),
        "init": Key(STR + TABLE, "zeros | normal | glorot, or a table by parameter name",
                    choices=INITS),
        "init_function": Key(STR, "a function () -> (params…) of the module that makes the "
                             "initial parameters, run by the interpreter (not with init)"),
        "init_seed": Key(INT, "seed of the initialization (default 0)", minimum=0),
        "init_scale": Key(NUM, "standard deviation of 'normal' (default 0.01)", minimum=0),
        "load": Key(STR, ".npz of initial parameters, by name", is_path=True,
                    must_exist=True),
        "batch_size": Key(INT, "examples per step (default 32)", minimum=1),
        "epochs": Key(INT, "passes over the training split", required=True, minimum=0),
        "learning_rate": Key(NUM, "the step size", required=True, minimum=0),
        "decay": Key(NUM, "learning rate of epoch e: lr / (1 + decay·e) (default 0)",
                     minimum=0),
        "shuffle_seed": Key(INT, "seed of the batch order (default 0)", minimum=0),
        "checkpoint": Key(STR, ".npz written after each epoch; --resume continues from it",
                          is_path=True, is_output=True),
        "metrics": Key(STR, "JSON-lines file of per-epoch metrics", is_path=True,
                       is_output=True),
        "precision": Key(STR, "f32 (default), bf16 or f16: the differentiated functions "
                         "computed in bf16 or f16 (the mixed-precision pass, run first), "
                         "parameters kept in f32; f16 with dynamic loss scaling",
                         choices=("f32", "bf16", "f16")),
        "loss_scale": Key(NUM, "f16: the first loss scale (default 32768, the largest f16 "
                          "power of two)", minimum=0),
        "loss_scale_interval": Key(INT, "f16: good steps in a row before the loss scale "
                                   "doubles (default 200)", minimum=1),
        "allow_nonfinite": Key(BOOL, "go on when the loss becomes NaN or infinite (default: "
                               "stop with an error)"),
        "evaluate": Key(TABLE, "the held-out evaluation"),
        "distributed": Key(TABLE, "how the steps run: the engine and its workers"),
    },
    "train.distributed": {
        "engine": Key(STR, "the training engine (default local: this process; ray: "
                      "data-parallel workers, from dlvm-ray)"),
        "workers": Key(INT, "data-parallel workers, each taking its share of every batch "
                       "(default 1)", minimum=1),
        "address": Key(STR, "where the workers run: local (a cluster started for the run), "
                       "auto (a running one) or ray://host:port (default local)"),
        "max_failures": Key(INT, "restarts after lost workers before the run stops "
                            "(default 3)", minimum=0),
        "allreduce": Key(STR, "how the workers' results are averaged: auto (default), "
                         "collective or object-store", choices=("auto", "collective",
                                                                 "object-store")),
    },
    "run": {
        "dir": Key(STR, "the folder that holds this pipeline's runs (default "
                   "\"out/<pipeline file stem>\")", is_path=True),
        "name": Key(STR, "the run's folder name (default: the time it starts, "
                    "YYYYMMDD-HHMMSS)"),
    },
    "train.evaluate": {
        "function": Key(STR, "(params…, inputs) -> scores", required=True),
        "metric": Key(STR, "how scores are compared with labels (default accuracy)",
                      choices=METRICS),
    },
}
ACTIONS = ("emit", "call", "train")
TOP_LEVEL = ("module", "passes", "target", "data", *ACTIONS, "run")
