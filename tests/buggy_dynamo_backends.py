"""Deliberately wrong torch.compile backends, loaded as `dynamo:tests.buggy_dynamo_backends:<fn>`:
real FX passes over the graph dynamo traced, each wrong on one known pattern, so that tests know
the minimal trigger a campaign's reduction must end at."""
import torch


def _is_sum(node) -> bool:
    return isinstance(node, torch.fx.Node) and node.target in (torch.sum, "sum")


def wrong_backend(gm: torch.fx.GraphModule, example_inputs: list):
    """A "fused sum+sigmoid" rewrite that forgets to undo a scale: sigmoid(sum(x)) comes out 10%
    too large. Every other graph runs as traced."""
    for node in list(gm.graph.nodes):
        if node.target in (torch.sigmoid, "sigmoid") and _is_sum(node.args[0]):
            with gm.graph.inserting_after(node):
                scaled = gm.graph.call_function(torch.mul, (node, 1.1))
            node.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)
    gm.recompile()
    return gm.forward


def crash_backend(gm: torch.fx.GraphModule, example_inputs: list):
    """Crashes in the user's code: compiling any graph with an exp, running any graph with a tanh."""
    targets = {node.target for node in gm.graph.nodes}
    if targets & {torch.exp, "exp"}:
        raise NotImplementedError("exp is not lowered yet")
    if targets & {torch.tanh, "tanh"}:
        def run(*args):
            raise RuntimeError("tanh kernel: illegal memory access")
        return run
    return gm.forward
