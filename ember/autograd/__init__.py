"""ember's ahead-of-time autograd: ATen tracing, functionalization, joint graph, partitioning."""
from .api import aot_eager_backend, aot_function, aot_module
from .joint import JointSpec, trace_joint
from .partition import Partition, partition_default, partition_min_cut
from .tracer import AtenTracer, TracingError

__all__ = [
    "aot_function", "aot_module", "aot_eager_backend", "trace_joint", "JointSpec", "Partition",
    "partition_default", "partition_min_cut", "AtenTracer", "TracingError",
]
