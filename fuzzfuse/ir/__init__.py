"""Graph IR: the op registry, static typing, JSON, input materialization and eager interpretation."""
from .graph import SCHEMA_VERSION, Graph, GraphError, Layout, Node, ScalarInput, TensorInput, Values
from .interp import compile_source, flush_denormals, interpret, run_autograd, run_eager, run_fp32_compute, to_source
from .ops import OPS, OPS_BY_KIND, Op
from . import ops_shape  # noqa: F401  (registers the resize, indexing, matmul, arg and scan ops in OPS)
from .types import DTYPES, FLOAT_DTYPES, INT_DTYPES, ValueType, result_type
from .values import make_input, make_inputs

__all__ = ["SCHEMA_VERSION", "Graph", "GraphError", "Layout", "Node", "ScalarInput", "TensorInput", "Values",
           "compile_source", "flush_denormals", "interpret", "run_autograd", "run_eager", "run_fp32_compute", "to_source",
           "OPS", "OPS_BY_KIND", "Op", "DTYPES",
           "FLOAT_DTYPES", "INT_DTYPES", "ValueType", "result_type", "make_input", "make_inputs"]
