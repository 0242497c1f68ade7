"""Training steps that call torch.optim and LR schedulers, and capture's no-real-writes rule.

Capture runs library Python (an optimizer's `step`, the wrapper an LR scheduler installs on
it) symbolically, on fake tensors.  It must never write into a real object: every attribute
write and container mutation goes to the side-effect log and is replayed with real values
after the graph runs, and a capture that fails or restarts leaves nothing behind.  Each test
compares with an identical eager copy built by the same factory.
"""
from __future__ import annotations

import functools
import importlib
import operator
import warnings
import weakref

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

import ember

OPTIMIZERS = {
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01, weight_decay=0.1),
    "sgd": lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9),
    "sgd_foreach": lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9, foreach=True),
}
SCHEDULERS = {
    "step": lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    "lambda": lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.9 ** epoch),
    "onecycle": lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=20),
    "cosine": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10),
}
TOLERANCE = dict(rtol=1e-5, atol=1e-6)
ADAM_MODULE = importlib.import_module("torch.optim.adam")  # torch.optim hides its submodules


@pytest.fixture(autouse=True)
def optimizers_as_torch_ships_them(monkeypatch):
    """Once torch.compile has run in a process (another test did), torch._dynamo keeps every
    optimizer's _init_group wrapped in its disable() for good, and ember respects that (the
    step then runs eagerly).  These tests are about capturing the optimizers as torch ships them."""
    for cls in vars(torch.optim).values():
        if isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer):
            original = getattr(cls.__dict__.get("_init_group"), "_torchdynamo_orig_callable", None)
            if original is not None:
                monkeypatch.setattr(cls, "_init_group", original)


class Training:
    """A small MLP, an optimizer, a scheduler and the train step over them."""

    def __init__(self, optimizer: str, scheduler: str | None = "step") -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        self.opt = OPTIMIZERS[optimizer](self.model.parameters())
        self.sched = SCHEDULERS[scheduler](self.opt) if scheduler else None
        loss_fn = torch.nn.MSELoss()
        opt, sched, model = self.opt, self.sched, self.model

        def step(x, y):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss

        self.step = step

    def fill_grads(self, x, y) -> None:
        """Gradients from one eager backward, for tests that compile `opt.step()` alone."""
        self.opt.zero_grad()
        torch.nn.functional.mse_loss(self.model(x), y).backward()


def batches(count: int):
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(4, 8, generator=generator), torch.randn(4, 4, generator=generator)) for _ in range(count)]


def assert_real_state(opt) -> None:
    """Every tensor the optimizer holds is a real tensor (not a FakeTensor from a capture)."""
    for param, state in opt.state.items():
        assert not isinstance(param, FakeTensor)
        for key, value in state.items():
            assert not isinstance(value, FakeTensor), f"opt.state[...][{key!r}] is a FakeTensor"
    for group in opt.param_groups:
        for key, value in group.items():
            assert not isinstance(value, FakeTensor), f"param_groups[...][{key!r}] is a FakeTensor"


def assert_same_training(compiled: Training, eager: Training) -> None:
    for p, q in zip(compiled.model.parameters(), eager.model.parameters()):
        torch.testing.assert_close(p, q, **TOLERANCE)
        state, expected = compiled.opt.state[p], eager.opt.state[q]
        assert state.keys() == expected.keys()
        for key in expected:
            torch.testing.assert_close(state[key], expected[key], **TOLERANCE)
    assert_real_state(compiled.opt)
    for group, expected in zip(compiled.opt.param_groups, eager.opt.param_groups):
        assert group.keys() == expected.keys()
        for key, value in expected.items():
            if key == "params":
                continue
            # (one key at a time: newer pytest refuses approx of a dict holding tuples, like betas)
            if isinstance(value, float) or (isinstance(value, tuple) and all(isinstance(v, float) for v in value)):
                assert group[key] == pytest.approx(value), key
            else:
                assert group[key] == value, key
    if eager.sched is not None:
        assert compiled.sched.get_last_lr() == pytest.approx(eager.sched.get_last_lr())
        assert compiled.sched.last_epoch == eager.sched.last_epoch
        assert compiled.sched._step_count == eager.sched._step_count
        assert compiled.sched._get_lr_called_within_step is False


def run_training(optimizer: str, scheduler: str, backend: str, steps: int = 5, **options) -> None:
    from ember.capture.runtime import CaptureObserver

    ember.reset()
    compiled, eager = Training(optimizer, scheduler), Training(optimizer, scheduler)
    compiled_step = ember.compile(compiled.step, backend=backend, **options)
    with CaptureObserver() as observer:
        for x, y in batches(steps):
            torch.testing.assert_close(compiled_step(x, y), eager.step(x, y), **TOLERANCE)
            assert_same_training(compiled, eager)
    # Captured, not run eagerly: the only breaks are zero_grad (torch disables tracing it) and
    # backward, as with torch.compile.
    reasons = {record.reason.split()[0] for record in observer.breaks}
    assert reasons == {"Optimizer.zero_grad", "Tensor.backward()"}, observer.breaks
    assert not observer.skips
    # The real objects are intact: a plain eager step goes on from where the compiled ones left.
    compiled.opt.step()
    eager.opt.step()
    assert_same_training(compiled, eager)


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_train_step_matches_eager(optimizer, scheduler):
    run_training(optimizer, scheduler, "eager")


@pytest.mark.parametrize("scheduler", ["step", "onecycle"])
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_train_step_matches_eager_aot(optimizer, scheduler):
    # The optimizer's graph writes parameters in place under no_grad (set inside the graph).
    run_training(optimizer, scheduler, "aot_eager")


def test_train_step_past_the_recompile_limit():
    """With dynamic=False the scheduler's counters and the learning rate stay guarded constants:
    each step recompiles until the limit, then that part runs eagerly, and the hand-over from
    compiled to eager steps keeps the optimizer's state intact."""
    with pytest.warns(UserWarning, match="recompile_limit"):
        run_training("adamw", "onecycle", "eager", steps=ember.config.recompile_limit + 3, dynamic=False)


def test_optimizer_step_is_captured_not_run_on_fakes():
    """opt.step() is one graph with the update in it: nothing runs eagerly, nothing is lost."""
    training, reference = Training("adamw", None), Training("adamw", None)
    x, y = batches(1)[0]
    training.fill_grads(x, y)
    reference.fill_grads(x, y)
    ember.reset()
    explained = ember.explain(lambda: training.opt.step())()
    reference.opt.step()
    assert explained.graph_break_count == 0 and not explained.frames_run_eagerly
    assert explained.graph_count == 1
    ops = explained.ops_per_graph[0]
    assert ops.count("Tensor.addcdiv_") + ops.count("Tensor.add_") >= 4  # every parameter updated
    assert_same_training(training, reference)


_DYNAMO_COUNTS = """
import sys, warnings, torch, torch._dynamo
sys.path.insert(0, {here!r})
from test_optimizer_capture import Training, batches
training = Training("adamw")
x, y = batches(1)[0]
training.step(x, y)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    explained = torch._dynamo.explain(training.step)(x, y)
print(explained.graph_count, explained.graph_break_count)
"""


def test_graph_and_break_counts_match_torch_compile():
    """ember: zero_grad runs eagerly (torch disables tracing it) and backward breaks; torch.compile
    makes as many graphs.  torch.compile runs in a subprocess: it patches torch.optim for good
    (its disable() on every optimizer's _init_group), which ember then respects."""
    import os
    import subprocess
    import sys

    training = Training("adamw")
    x, y = batches(1)[0]
    training.step(x, y)  # optimizer state exists: the steady state is what is counted
    explained = ember.explain(training.step)(x, y)
    reasons = [record.reason for record in explained.break_reasons]
    assert explained.graph_count == 2, reasons
    assert len(reasons) == 2 and "zero_grad" in reasons[0] and "backward" in reasons[1], reasons
    assert not explained.frames_run_eagerly
    script = _DYNAMO_COUNTS.format(here=os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    dynamo_graphs, dynamo_breaks = map(int, result.stdout.split()[-2:])
    assert explained.graph_count == dynamo_graphs
    assert dynamo_breaks <= explained.graph_break_count


def test_torch_compiler_disabled_function_breaks():
    @torch.compiler.disable
    def opaque(x):
        return x * 2

    def fn(x):
        return opaque(x + 1) - 1

    explained = ember.explain(fn)(torch.ones(2))
    assert [record.reason for record in explained.break_reasons] == \
        [f"{opaque.__qualname__} is torch.compiler.disable'd"]
    torch.testing.assert_close(ember.compile(fn, backend="eager")(torch.ones(2)), fn(torch.ones(2)))


# -- a capture that fails or restarts writes nothing --------------------------------------------------
def _fingerprint(value, seen: set[int] | None = None):
    """A structural copy of `value` that a later comparison can tell apart from any change."""
    seen = set() if seen is None else seen
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), type(value), value.detach().clone())
    if isinstance(value, (int, float, str, bool, type(None), torch.dtype, torch.device)):
        return value
    if id(value) in seen:
        return ("seen", id(value))
    seen.add(id(value))
    if isinstance(value, dict):
        return (type(value), [(_fingerprint(k, seen), _fingerprint(v, seen)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value), [_fingerprint(item, seen) for item in value])
    attributes = getattr(value, "__dict__", None)
    if attributes is not None and not isinstance(value, type):
        return ("object", id(value), type(value), _fingerprint(attributes, seen))
    return ("object", id(value), type(value))


def _assert_same_fingerprint(after, before) -> None:
    if isinstance(before, tuple) and before and before[0] == "tensor":
        assert after[:3] == before[:3] and torch.equal(after[3], before[3])
    elif isinstance(before, (list, tuple)):
        assert type(after) is type(before) and len(after) == len(before), (after, before)
        for item_after, item_before in zip(after, before):
            _assert_same_fingerprint(item_after, item_before)
    else:
        assert after == before


def _breaking(original):
    """`original` with a graph break in front: at capture time, after `_init_group` wrote state."""
    def patched(*args, **kwargs):
        ember.graph_break()
        return original(*args, **kwargs)

    return patched


@pytest.mark.parametrize("optimizer", ["adamw", "adam"])
def test_failed_capture_leaves_real_objects_untouched(optimizer, monkeypatch):
    training, reference = Training(optimizer), Training(optimizer)
    x, y = batches(1)[0]
    training.fill_grads(x, y)
    reference.fill_grads(x, y)
    watched = [training.opt, training.sched, training.opt.step, list(training.model.parameters())]
    before = _fingerprint(watched)
    monkeypatch.setattr(ADAM_MODULE, "_single_tensor_adam", _breaking(ADAM_MODULE._single_tensor_adam))

    def step_and_schedule():
        training.opt.step()
        training.sched.step()

    with pytest.raises(ember.CaptureError):
        ember.compile(step_and_schedule, backend="eager", fullgraph=True)()
    _assert_same_fingerprint(_fingerprint(watched), before)
    assert len(training.opt.state) == 0 and "_opt_called" not in vars(training.opt)
    # Eager use goes on as if the capture never happened.
    training.opt.step()
    reference.opt.step()
    assert_same_training(training, reference)


def test_graph_break_restart_leaves_no_fake_values(monkeypatch):
    """A break found midway restarts the capture; the optimizer step then runs with real values."""
    compiled, eager = Training("adamw"), Training("adamw")
    seen_state: list[bool] = []
    original = ADAM_MODULE._single_tensor_adam

    def checking(*args, **kwargs):
        for opt in (compiled.opt, eager.opt):
            for state in opt.state.values():
                seen_state.extend(not isinstance(value, FakeTensor) for value in state.values())
        return original(*args, **kwargs)

    monkeypatch.setattr(ADAM_MODULE, "_single_tensor_adam", _breaking(checking))
    ember.reset()
    compiled_step = ember.compile(compiled.step, backend="eager")
    for x, y in batches(3):
        torch.testing.assert_close(compiled_step(x, y), eager.step(x, y), **TOLERANCE)
        assert_same_training(compiled, eager)
    assert seen_state and all(seen_state)


def test_frame_run_eagerly_after_failed_capture_has_real_state(monkeypatch):
    """A break inside a loop makes the whole frame run eagerly: state writes of the abandoned
    capture must not be there when it does (they would be FakeTensors, then a KeyError)."""
    compiled, eager = Training("adamw"), Training("adamw")
    monkeypatch.setattr(ADAM_MODULE, "_single_tensor_adam", _breaking(ADAM_MODULE._single_tensor_adam))

    def make_steps(training):
        def steps():
            for _ in range(2):
                training.opt.step()
        return steps

    ember.reset()
    compiled_steps = ember.compile(make_steps(compiled), backend="eager")
    for x, y in batches(2):
        compiled.fill_grads(x, y)
        eager.fill_grads(x, y)
        compiled_steps()
        make_steps(eager)()
        assert_same_training(compiled, eager)


# -- other places where capture meets real Python objects ---------------------------------------------
def test_operator_functions_that_mutate_write_like_eager():
    """operator.setitem & co. used to run for real on a copy of a constant-looking list: the
    write vanished.  They are modelled like the statements they stand for."""
    def fn(x, items, table):
        operator.setitem(items, 0, 5)
        operator.iadd(items, [7])
        operator.delitem(table, "a")
        operator.setitem(table, "c", 3)
        return x + 1

    compiled_items, compiled_table = [1, 2], {"a": 1, "b": 2}
    eager_items, eager_table = [1, 2], {"a": 1, "b": 2}
    with ember.config.patch(raise_capture_errors=True):
        ember.compile(fn, backend="eager")(torch.ones(2), compiled_items, compiled_table)
    fn(torch.ones(2), eager_items, eager_table)
    assert compiled_items == eager_items and compiled_table == eager_table


CALLS: list[str] = []


@functools.wraps(torch.nn.functional.relu)
def shifted_relu(x):
    CALLS.append("relu")  # functools.wraps made this function claim torch.nn.functional as its module
    return torch.nn.functional.relu(x) + 1


def test_wrapper_renamed_as_torch_function_is_inlined():
    """A Python function whose code is not torch's own is inlined, whatever its __module__ says.
    As a graph node it ran once on fake tensors at capture time (its writes landing in real
    objects), and FX printed its target by that borrowed name: the graph called F.relu."""
    def fn(x):
        return shifted_relu(x) * 2

    CALLS.clear()
    compiled = ember.compile(fn, backend="eager")
    x = torch.randn(3)
    with ember.config.patch(raise_capture_errors=True):
        torch.testing.assert_close(compiled(x), fn(x))
    assert CALLS == ["relu", "relu"]  # one compiled call, one eager call


class CachedScale:
    def __init__(self) -> None:
        self.factor = 3.0

    @property
    def scale(self):
        self._cached = self.factor * 2  # a getter that writes (a cache)
        return self._cached


def test_property_getter_writes_are_logged():
    def fn(x, obj):
        return x * obj.scale

    compiled_obj, eager_obj = CachedScale(), CachedScale()
    with ember.config.patch(raise_capture_errors=True):
        torch.testing.assert_close(ember.compile(fn, backend="eager")(torch.ones(2), compiled_obj),
                                   fn(torch.ones(2), eager_obj))
    assert vars(compiled_obj) == vars(eager_obj)

    def failing(x, obj):
        y = x * obj.scale
        ember.graph_break()
        return y

    untouched = CachedScale()
    with pytest.raises(ember.CaptureError):
        ember.compile(failing, backend="eager", fullgraph=True)(torch.ones(2), untouched)
    assert vars(untouched) == {"factor": 3.0}


REGISTRY: list = []


class Registered:
    def __init__(self, value) -> None:
        self.value = value
        REGISTRY.append(self)  # __init__ writes into an object that existed before


def test_user_init_that_registers_itself():
    def fn(x):
        item = Registered(2.0)
        return x * item.value

    REGISTRY.clear()
    with ember.config.patch(raise_capture_errors=True):
        torch.testing.assert_close(ember.compile(fn, backend="eager")(torch.ones(2)), torch.full((2,), 2.0))
    assert len(REGISTRY) == 1 and type(REGISTRY[0]) is Registered and REGISTRY[0].value == 2.0

    def failing(x):
        Registered(1.0)
        ember.graph_break()
        return x

    REGISTRY.clear()
    with pytest.raises(ember.CaptureError):
        ember.compile(failing, backend="eager", fullgraph=True)(torch.ones(2))
    assert REGISTRY == []


def test_optimizer_step_hooks_run_symbolically():
    compiled, eager = Training("sgd", None), Training("sgd", None)
    records: dict[str, list] = {"compiled": [], "eager": []}

    def install(training, log):
        def pre_hook(opt, args, kwargs):
            log.append(("pre", len(opt.state)))

        def post_hook(opt, args, kwargs):
            log.append(("post", len(opt.state)))
            opt.hooked_steps = getattr(opt, "hooked_steps", 0) + 1

        training.opt.register_step_pre_hook(pre_hook)
        training.opt.register_step_post_hook(post_hook)

    install(compiled, records["compiled"])
    install(eager, records["eager"])
    ember.reset()
    explained = None
    for x, y in batches(2):
        compiled.fill_grads(x, y)
        eager.fill_grads(x, y)
        with ember.config.patch(raise_capture_errors=True):
            explained = ember.explain(lambda: compiled.opt.step())()
        eager.opt.step()
        assert_same_training(compiled, eager)
    assert explained.graph_break_count == 0 and not explained.frames_run_eagerly
    assert records["compiled"] == records["eager"] == [("pre", 0), ("post", 4), ("pre", 4), ("post", 4)]
    assert compiled.opt.hooked_steps == eager.opt.hooked_steps == 2


def test_dict_keyed_by_tensors():
    weight = torch.randn(3)
    bias = torch.randn(3)

    def fn(x, cache):
        if weight not in cache:
            cache[weight] = weight * 2
        cache[bias] = cache.get(bias, 0) + 1
        return x + cache[weight]

    compiled_cache, eager_cache = {}, {}
    with ember.config.patch(raise_capture_errors=True):
        for _ in range(2):
            explained = ember.explain(fn)(torch.ones(3), compiled_cache)
            assert explained.graph_break_count == 0 and not explained.frames_run_eagerly
            fn(torch.ones(3), eager_cache)
    assert list(map(id, compiled_cache)) == list(map(id, eager_cache)) == [id(weight), id(bias)]
    assert not isinstance(compiled_cache[weight], FakeTensor)
    torch.testing.assert_close(compiled_cache[weight], eager_cache[weight])
    assert compiled_cache[bias] == eager_cache[bias] == 2


class Counter:
    def __init__(self) -> None:
        self.entered = 0
        self.active = False

    def __enter__(self):
        self.entered += 1
        self.active = True
        return self

    def __exit__(self, *exc):
        self.active = False
        return False


def test_user_context_manager_and_weakref():
    counter = Counter()
    counter_ref = weakref.ref(counter)

    def fn(x):
        with counter_ref() as active:
            y = x * (2 if active.active else 3)
        return y + counter_ref().entered

    with ember.config.patch(raise_capture_errors=True):
        explained = ember.explain(fn)(torch.ones(2))
    assert explained.graph_break_count == 0 and not explained.frames_run_eagerly
    assert counter.entered == 1 and counter.active is False
    torch.testing.assert_close(ember.compile(fn, backend="eager")(torch.ones(2)), torch.full((2,), 4.0))
    assert counter.entered == 2 and counter.active is False


def test_exception_leaving_user_context_manager_matches_eager():
    counter = Counter()

    def fn(x):
        with counter:
            raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        ember.compile(fn, backend="eager")(torch.ones(2))
    assert counter.entered == 1 and counter.active is False


def test_builtin_generic_alias_in_a_cast():
    """`cast(list[Tensor], xs)` (torch's foreach optimizers): list[...] is made for real, no break."""
    import typing

    def fn(xs):
        ys = typing.cast(list[torch.Tensor], xs)
        return ys[0] + ys[1]

    with ember.config.patch(raise_capture_errors=True):
        explained = ember.explain(fn)([torch.ones(2), torch.ones(2)])
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_global_setter_is_not_run_at_capture_time():
    """A torch setter of global state used to run for real at capture time (and, returning None,
    was then dropped from the graph): a failed capture changed the setting."""
    def fn(x):
        torch.set_float32_matmul_precision("medium")
        ember.graph_break()
        return x + 1

    previous = torch.get_float32_matmul_precision()
    assert previous != "medium"
    try:
        with pytest.raises(ember.CaptureError):
            ember.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))
        assert torch.get_float32_matmul_precision() == previous
        torch.testing.assert_close(ember.compile(fn, backend="eager")(torch.ones(2)), torch.full((2,), 2.0))
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(previous)


def test_real_object_watch_names_what_changed():
    from ember.capture.side_effects import RealObjectWatch

    table, items, obj, tensor = {"a": 1}, [1, 2], CachedScale(), torch.zeros(2)
    watch = RealObjectWatch()
    for value, label in [(table, "table"), (items, "items"), (obj, "obj"), (tensor, "tensor")]:
        watch.watch(value, label)
    assert watch.changed() == []
    table["b"] = 2
    items[0] = 3
    obj.factor = 4.0
    tensor.add_(1)
    assert watch.changed() == ["table", "items", "obj", "tensor"]


def test_a_capture_that_writes_a_real_object_is_reported(monkeypatch):
    """If some path wrote into a real object during capture (an ember bug), the capture says so."""
    from ember.capture.variables.objects import UserObjectVariable

    def store_for_real(self, tx, name, value):
        setattr(self.value, name, value.as_python_constant())

    monkeypatch.setattr(UserObjectVariable, "store_attr", store_for_real)

    def fn(x, obj):
        obj.factor = 5.0
        return x + 1

    with pytest.raises(RuntimeError, match=r"ember bug: capture wrote into real objects: obj"):
        with ember.config.patch(raise_capture_errors=True):
            ember.compile(fn, backend="eager")(torch.ones(2), CachedScale())


# -- learning rates and step counters that change every step (capture/scalars.py) ------------------
WARMUP_SCHEDULERS = {
    "warmup": lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 5)),
    "step": lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
    "cosine": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10),
}
# 14 compiled steps drift from eager's by the optimizer's float32 bias corrections (the compiled
# path keeps them in tensors, as torch.compile does: its own drift here is 1.8e-6 at most).
LONG_TOLERANCE = dict(rtol=1e-4, atol=1e-5)


class WarmupTraining:
    """AdamW and a scheduler that changes the learning rate every step (or every few)."""

    def __init__(self, scheduler: str) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=0.01)
        self.sched = WARMUP_SCHEDULERS[scheduler](self.opt)
        opt, sched, model = self.opt, self.sched, self.model

        def step(x, y):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss

        self.step = step


def _counting_backend():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return graphs, backend


def _unwrap_init_group() -> None:
    """Undo torch.compile's lasting disable() on every optimizer's _init_group (see the fixture)."""
    for cls in vars(torch.optim).values():
        if isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer):
            original = getattr(cls.__dict__.get("_init_group"), "_torchdynamo_orig_callable", None)
            if original is not None:
                cls._init_group = original


def torch_compile_graph_count(run) -> int:
    """How many graphs torch.compile hands its backend for `run(compile)` (run last in a test:
    it leaves torch._dynamo imported; the optimizers are unwrapped again after it)."""
    import torch._dynamo

    graphs, backend = _counting_backend()
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run(lambda fn: torch.compile(fn, backend=backend))
    finally:
        torch._dynamo.reset()
        _unwrap_init_group()
    return len(graphs)


def train_warmup(scheduler: str, compile_fn, steps: int = 14) -> WarmupTraining:
    """`steps` compiled steps beside an eager copy: losses, parameters and learning rates agree."""
    compiled, eager = WarmupTraining(scheduler), WarmupTraining(scheduler)
    compiled_step = compile_fn(compiled.step)
    for x, y in batches(steps):
        torch.testing.assert_close(compiled_step(x, y), eager.step(x, y), **LONG_TOLERANCE)
        for p, q in zip(compiled.model.parameters(), eager.model.parameters()):
            torch.testing.assert_close(p, q, **LONG_TOLERANCE)
        assert compiled.opt.param_groups[0]["lr"] == eager.opt.param_groups[0]["lr"]  # (exactly eager's)
        assert compiled.sched.last_epoch == eager.sched.last_epoch
        assert compiled.sched._step_count == eager.sched._step_count
    assert_real_state(compiled.opt)
    return compiled


@pytest.mark.parametrize("scheduler", sorted(WARMUP_SCHEDULERS))
def test_changing_learning_rate_makes_no_more_graphs_than_torch_compile(scheduler):
    """AdamW with a warm-up LambdaLR (StepLR, CosineAnnealingLR), 14 steps: the learning rate and
    the scheduler's counters become graph inputs after their first change (before: a recompile
    per step up to the limit, then the optimizer ran eagerly for good; 9 graphs).  torch.compile
    makes 3: the forward, the optimizer's step, and that step again with a dynamic lr."""
    ember.reset()
    graphs, backend = _counting_backend()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_warmup(scheduler, lambda fn: ember.compile(fn, backend=backend))
    assert not [w for w in caught if "recompile_limit" in str(w.message)]
    torch_graphs = torch_compile_graph_count(lambda compile_fn: train_warmup(scheduler, compile_fn))
    assert len(graphs) <= torch_graphs, (len(graphs), torch_graphs)
    assert len(graphs) == 3


@pytest.mark.parametrize("backend,scheduler", [("aot_eager", "warmup"), ("aot_eager", "step"),
                                               ("aot_eager", "cosine"), ("ember", "warmup")])
def test_changing_learning_rate_with_aot_backends(backend, scheduler):
    """The learning rate reaches ATen ops as a symbolic float (`param.mul_(1 - lr * wd)`): ember's
    AOT autograd traces it as a graph input, never as the value it had at the first trace."""
    ember.reset()
    from ember.capture.runtime import counters

    train_warmup(scheduler, lambda fn: ember.compile(fn, backend=backend))
    assert counters["stats"]["unique_graphs"] == 3
    assert counters["stats"]["backend_compiles"] <= 3


def test_compiled_optimizer_step_with_an_eager_scheduler():
    """torch users' form: only `opt.step()` compiled, the scheduler stepped eagerly."""
    def run(compile_fn, steps=14):
        training, reference = WarmupTraining("warmup"), WarmupTraining("warmup")
        opt_step = compile_fn(lambda: training.opt.step())
        for x, y in batches(steps):
            training.opt.zero_grad()
            torch.nn.functional.mse_loss(training.model(x), y).backward()
            opt_step()
            training.sched.step()
            reference.opt.zero_grad()
            torch.nn.functional.mse_loss(reference.model(x), y).backward()
            reference.opt.step()
            reference.sched.step()
            for p, q in zip(training.model.parameters(), reference.model.parameters()):
                torch.testing.assert_close(p, q, **LONG_TOLERANCE)

    ember.reset()
    graphs, backend = _counting_backend()
    run(lambda fn: ember.compile(fn, backend=backend))
    torch_graphs = torch_compile_graph_count(run)
    assert len(graphs) <= torch_graphs, (len(graphs), torch_graphs)
