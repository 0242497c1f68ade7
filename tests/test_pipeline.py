"""The ember backend's one list of steps (ember/pipeline.py): each named, logged under its own
EMBER_LOGS channel, timed, and checked under `ember.config.verify_graphs`."""
import dataclasses
import logging

import pytest
import torch

import ember
from ember import logs
from ember.codegen import compile as graph_steps
from ember.autograd.aot_steps import CapturedWork
from ember.pipeline import STEP_NAMES, STEPS
from ember.steps import run_steps


def _train_step(x, w):
    return torch.nn.functional.linear(torch.relu(x), w).sum()


def _run(fn=_train_step):
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(3, 8, requires_grad=True)
    out = ember.compile(fn)(x, w)
    out.backward()
    return out


def test_every_step_has_its_own_log_channel_in_pipeline_order():
    assert len(set(STEP_NAMES)) == len(STEP_NAMES)
    assert all(name in logs.CHANNELS for name in STEP_NAMES)
    units = [step.unit for step in STEPS]
    assert units == sorted(units, key=["captured", "joint", "graph"].index)  # the units in pipeline order
    assert STEP_NAMES.index("trace_joint") < STEP_NAMES.index("partition") < STEP_NAMES.index("lower") \
        < STEP_NAMES.index("schedule") < STEP_NAMES.index("kernels") < STEP_NAMES.index("wrapper")


def _attention(q, k, mask):
    return torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask).sum()


def _convolution(x, w):
    return torch.nn.functional.conv2d(x.view(1, 2, 4, 4), w.view(3, 8, 1, 1)[:, :2]).sum()


# A rewrite prints the graph when it changed it: a program it changes on the CPU, with the
# settings it needs (cpu_scalars and bias_epilogue change CUDA graphs only).
REWRITES = {"attention_masks": (_attention, {}), "channels_last": (_convolution, {"channels_last_convolutions": "cpu"}),
            "cpu_scalars": None, "bias_epilogue": None}
DUMPING = [step.name for step in STEPS if step.dump is not None]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("name", DUMPING)
def test_ember_logs_names_each_step(name):
    fn, settings = REWRITES.get(name, (_train_step, {})) or (None, None)
    if fn is None:
        pytest.skip(f"{name} rewrites CUDA graphs only")
    # (a handler of its own on the channel: what other tests did to the root logger or to
    # pytest's capture does not matter)
    # (nor a logging.config.dictConfig another test's imports ran, which disables existing loggers)
    logger, handler = logs.get(name), _Records()
    old_level, old_disabled = logger.level, logger.disabled
    logger.setLevel(logging.DEBUG)
    logger.disabled = False
    logger.addHandler(handler)
    try:
        with ember.config.patch(**settings):
            if name in REWRITES:  # (the rewrite on its own, on the graph capture makes)
                graphs = []
                x, w = torch.randn(4, 8), torch.randn(4 if fn is _attention else 3, 8)
                # (a mask whose last dim is broadcast, as an input: the rewrite makes it contiguous)
                args = [x, w, torch.ones(4, 1, dtype=torch.bool).expand(4, 4)] if fn is _attention else [x, w]
                ember.compile(fn, backend=lambda gm, inputs: graphs.append(gm) or gm.forward)(*args)
                (step,) = [step for step in STEPS if step.name == name]
                work = CapturedWork(gm=graphs[0], example_inputs=args)
                run_steps([step], "captured", work)
                assert work.changed, f"{name} changed nothing in {graphs[0].code}"
                # (what the loop logs is the dump, as for every step below; a debug report switched
                # off late once reset this channel's level here: test_debug_dir pins that)
                assert "contiguous" in step.dump(work), step.dump(work)
                return
            _run(fn)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.disabled = old_disabled
    assert handler.records and handler.records[0].getMessage().strip(), name


def test_each_graph_step_is_timed():
    seen = []
    original = graph_steps.CUDAGRAPHS.run  # (the last: every step before it timed)

    def spy(work):
        original(work)
        seen.append(dict(work.timings))

    steps = tuple(dataclasses.replace(step, run=spy) if step is graph_steps.CUDAGRAPHS else step for step in STEPS)
    compiler = graph_steps.graph_compiler(steps)
    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) * 2)
    x = torch.randn(5)
    from ember.autograd.api import aot_backend

    compiled = aot_backend(compiler, steps=steps)(gm, [x])
    torch.testing.assert_close(compiled(x), torch.relu(x) * 2)
    assert seen and {"lower", "schedule", "kernels", "build", "load", "wrapper"} <= set(seen[0])


def test_verify_graphs_catches_a_step_that_breaks_its_graph():
    """A rewrite that leaves a node without its value fails at that step, named, not later."""
    def broken(work):
        original(work)
        for node in work.gm.graph.nodes:
            if node.op == "call_function":
                node.meta.pop("val", None)
                break

    original = graph_steps.CPU_SCALARS.run
    steps = tuple(dataclasses.replace(step, run=broken) if step is graph_steps.CPU_SCALARS else step for step in STEPS)
    from ember.autograd.api import aot_backend

    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) * 2)
    x = torch.randn(5)
    with ember.config.patch(verify_graphs=True), pytest.raises(AssertionError, match="has no meta"):
        aot_backend(graph_steps.graph_compiler(steps), steps=steps)(gm, [x])(x)
    with ember.config.patch(verify_graphs=False):  # (unchecked, the step's damage shows later or not at all)
        try:
            aot_backend(graph_steps.graph_compiler(steps), steps=steps)(gm, [x])(x)
        except Exception:  # noqa: BLE001
            pass


def test_the_lowering_check_finds_a_read_of_an_undefined_buffer():
    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    x = torch.randn(5)
    from ember.autograd.joint import trace_joint

    joint, _ = trace_joint(gm, [x], with_backward=False)
    work = graph_steps.GraphWork(gm=joint, example_inputs=[x])
    graph_steps.LOWER.run(work)
    graph_steps.LOWER.verify(work)  # a lowering as made passes
    work.lowering.inputs.clear()
    with pytest.raises(AssertionError, match="before they are defined"):
        graph_steps.LOWER.verify(work)


def test_the_schedule_check_finds_a_step_before_what_it_reads():
    gm = torch.fx.symbolic_trace(lambda x: torch.mm(torch.relu(x), x).exp())
    x = torch.randn(5, 5)
    from ember.autograd.joint import trace_joint

    joint, _ = trace_joint(gm, [x], with_backward=False)
    work = graph_steps.GraphWork(gm=joint, example_inputs=[x])
    graph_steps.LOWER.run(work)
    graph_steps.SCHEDULE.run(work)
    graph_steps.SCHEDULE.verify(work)  # a schedule as made passes
    assert len(work.scheduler.steps) >= 3  # relu's kernel, the mm, exp's kernel
    work.scheduler.steps.reverse()
    with pytest.raises(AssertionError, match="out of order"):
        graph_steps.SCHEDULE.verify(work)
