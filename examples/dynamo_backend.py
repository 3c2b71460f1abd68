"""A small, correct torch.compile backend: the shape of what `--backend dynamo:module:function` fuzzes.

    python -m fuzzfuse fuzz --backend dynamo:examples.dynamo_backend:my_backend --max-cases 50

A backend receives the FX GraphModule that dynamo traced and example inputs (fake tensors: their
shapes and dtypes, not their values), and returns the callable that dynamo calls instead of the
Python code. This one runs the graph node by node through `torch.fx.Interpreter`, where a real
backend would rewrite it or generate code.
"""
import torch


def my_backend(gm: torch.fx.GraphModule, example_inputs: list):
    def run(*args):
        return torch.fx.Interpreter(gm).run(*args)
    return run
