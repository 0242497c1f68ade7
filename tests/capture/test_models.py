"""Whole-model tests for ember's capture frontend: small models with random weights.

For each model (BERT, GPT-2 and T5 from tiny transformers configs, an MLP, a small CNN):

* inference: ``ember.compile(model, backend="eager")`` gives outputs bitwise equal to eager
  (rtol=0, atol=0) on two calls with fresh inputs;
* training: one step (train() with dropout probabilities 0) gives the same loss and bitwise
  equal gradients for every parameter (and equal buffers) on a deep copy of the model;
* coverage: on a cached call, every aten op the model runs executes inside a graph that
  ember captured (ops run outside graphs mean part of the model was never captured).

The number of graphs and graph breaks ember made for each model is printed (``-s``) and
summarised at the end of the module's run.

Nothing is downloaded: every model is built from a config with random weights.
"""
from __future__ import annotations

import copy
import threading
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import ember

transformers = pytest.importorskip("transformers")

VOCAB = 128
BATCH = 2
SEQ = 16
DECODER_SEQ = 8


# ---------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        x = self.pool(self.relu(self.bn2(self.conv2(x))))
        x = torch.flatten(x, 1)
        return self.fc(x)


def _bert(train: bool) -> nn.Module:
    extra = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0) if train else {}
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64, **extra)
    config._attn_implementation = "eager"
    return transformers.BertForMaskedLM(config)


def _gpt2(train: bool) -> nn.Module:
    extra = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0) if train else {}
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                     **extra)
    config._attn_implementation = "eager"
    return transformers.GPT2LMHeadModel(config)


def _t5(train: bool) -> nn.Module:
    extra = dict(dropout_rate=0.0) if train else {}
    # decoder_start_token_id: T5 shifts `labels` right with it (transformers 5 has no default).
    config = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                                   decoder_start_token_id=0, **extra)
    config._attn_implementation = "eager"
    return transformers.T5ForConditionalGeneration(config)


def _mlp(train: bool) -> nn.Module:
    return MLP()


def _cnn(train: bool) -> nn.Module:
    return SmallCNN()


FACTORIES = {"bert": _bert, "gpt2": _gpt2, "t5": _t5, "mlp": _mlp, "cnn": _cnn}
TRANSFORMERS = ("bert", "gpt2", "t5")


def make_model(name: str, train: bool = False) -> nn.Module:
    torch.manual_seed(1234)
    model = FACTORIES[name](train)
    if train:
        model.train()
        if name in TRANSFORMERS:
            dropouts = [m.p for m in model.modules() if isinstance(m, nn.Dropout)]
            assert all(p == 0.0 for p in dropouts), dropouts
    else:
        model.eval()
    return model


def make_inputs(name: str, seed: int, labels: bool = False) -> tuple[tuple, dict]:
    """(args, kwargs) for one call; `labels=True` adds what the training loss needs."""
    gen = torch.Generator().manual_seed(seed)
    if name in ("bert", "gpt2"):
        ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
        kwargs = {"input_ids": ids, "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long)}
        if labels:
            kwargs["labels"] = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
        return (), kwargs
    if name == "t5":
        kwargs = {"input_ids": torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen),
                  "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long)}
        if labels:
            kwargs["labels"] = torch.randint(0, VOCAB, (BATCH, DECODER_SEQ), generator=gen)
        else:
            kwargs["decoder_input_ids"] = torch.randint(0, VOCAB, (BATCH, DECODER_SEQ), generator=gen)
        return (), kwargs
    if name == "mlp":
        x = torch.randn(8, 32, generator=gen)
    else:
        x = torch.randn(4, 3, 16, 16, generator=gen)
    args = (x,)
    if labels:
        return args, {"__target": torch.randint(0, 10, (x.shape[0],), generator=gen)}
    return args, {}


def output_tensors(output, prefix: str = "out") -> dict[str, torch.Tensor]:
    """Every tensor in a model output: logits, hidden states, KV-cache keys/values."""
    found: dict[str, torch.Tensor] = {}
    if isinstance(output, torch.Tensor):
        found[prefix] = output
    elif isinstance(output, dict):  # transformers ModelOutput is an OrderedDict
        for key, value in output.items():
            found.update(output_tensors(value, f"{prefix}.{key}"))
    elif isinstance(output, (tuple, list)):
        for index, value in enumerate(output):
            found.update(output_tensors(value, f"{prefix}[{index}]"))
    elif output is None or isinstance(output, (int, float, bool, str)):
        pass
    elif hasattr(output, "self_attention_cache"):  # EncoderDecoderCache
        found.update(output_tensors(output.self_attention_cache, f"{prefix}.self_attention_cache"))
        found.update(output_tensors(output.cross_attention_cache, f"{prefix}.cross_attention_cache"))
    elif hasattr(output, "layers"):  # DynamicCache
        for index, layer in enumerate(output.layers):
            for attr in ("keys", "values"):
                value = getattr(layer, attr, None)
                if isinstance(value, torch.Tensor):
                    found[f"{prefix}.layers[{index}].{attr}"] = value
    else:
        raise TypeError(f"unexpected value in model output at {prefix}: {type(output).__name__}")
    return found


def assert_outputs_equal(actual, expected) -> None:
    actual_tensors = output_tensors(actual)
    expected_tensors = output_tensors(expected)
    assert type(actual) is type(expected)
    assert list(actual_tensors) == list(expected_tensors)
    assert expected_tensors, "no tensors in the model output"
    for key, value in expected_tensors.items():
        torch.testing.assert_close(actual_tensors[key], value, rtol=0, atol=0, msg=lambda m: f"{key}: {m}")


def run_model(model, name: str, args: tuple, kwargs: dict):
    kwargs = dict(kwargs)
    target = kwargs.pop("__target", None)
    output = model(*args, **kwargs)
    if target is None:
        return output, output.loss if hasattr(output, "loss") else None
    return output, F.cross_entropy(output, target)


# ---------------------------------------------------------------------------------------
# graph / break counts (printed, and summarised at the end)
# ---------------------------------------------------------------------------------------

_RESULTS: dict[tuple[str, str], dict] = {}
_RESULTS_LOCK = threading.Lock()


def ember_counts() -> dict:
    return {
        "graphs": ember.counters["stats"]["unique_graphs"],
        "breaks": sum(ember.counters["graph_break"].values()),
        "frames_run_eagerly": ember.counters["stats"]["frames_run_eagerly"],
        "captures": ember.counters["stats"]["captures"],
        "recompiles": ember.counters["stats"]["recompiles"],
    }


def record(test: str, name: str, counts: dict) -> None:
    with _RESULTS_LOCK:
        _RESULTS[(test, name)] = counts
    reasons = dict(ember.counters["graph_break"])
    print(f"[ember {test}] {name}: {counts['graphs']} graphs, {counts['breaks']} graph breaks, "
          f"{counts['frames_run_eagerly']} frames run eagerly, {counts['captures']} captures, "
          f"{counts['recompiles']} recompiles; break reasons: {reasons}")


@pytest.fixture(scope="module", autouse=True)
def _summary(request):
    yield
    if not _RESULTS:
        return
    lines = ["", "ember graphs / graph breaks per model (backend='eager'):",
             f"  {'test':<10} {'model':<6} {'graphs':>6} {'breaks':>6} {'eager frames':>12} {'recompiles':>10}"]
    for (test, name), c in sorted(_RESULTS.items()):
        lines.append(f"  {test:<10} {name:<6} {c['graphs']:>6} {c['breaks']:>6} {c['frames_run_eagerly']:>12} "
                     f"{c['recompiles']:>10}")
    text = "\n".join(lines)
    plugins = request.config.pluginmanager
    reporter, capture = plugins.getplugin("terminalreporter"), plugins.getplugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # visible without -s
            reporter.write_line(text)
    else:
        print(text)


@pytest.fixture(autouse=True)
def _fresh_ember():
    ember.reset()
    yield
    ember.reset()


# ---------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------

MODEL_NAMES = list(FACTORIES)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_inference_matches_eager(name):
    model = make_model(name, train=False)
    compiled = ember.compile(model, backend="eager")
    for call in range(2):
        args, kwargs = make_inputs(name, seed=100 + call)
        with torch.no_grad():
            expected = model(*args, **kwargs)
            actual = compiled(*args, **kwargs)
        assert_outputs_equal(actual, expected)
    record("inference", name, ember_counts())


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_training_step_matches_eager(name):
    eager_model = make_model(name, train=True)
    compiled_model = copy.deepcopy(eager_model)
    compiled = ember.compile(compiled_model, backend="eager")
    args, kwargs = make_inputs(name, seed=7, labels=True)

    eager_model.zero_grad(set_to_none=True)
    compiled_model.zero_grad(set_to_none=True)
    torch.manual_seed(0)
    expected_out, expected_loss = run_model(eager_model, name, args, kwargs)
    expected_loss.backward()
    torch.manual_seed(0)
    actual_out, actual_loss = run_model(compiled, name, args, kwargs)
    actual_loss.backward()

    record("training", name, ember_counts())
    assert actual_loss.requires_grad
    torch.testing.assert_close(actual_loss, expected_loss, rtol=0, atol=0)
    assert_outputs_equal(actual_out, expected_out)

    eager_params = dict(eager_model.named_parameters())
    compiled_params = dict(compiled_model.named_parameters())
    assert list(compiled_params) == list(eager_params)
    with_grad = 0
    for pname, param in eager_params.items():
        other = compiled_params[pname]
        assert other is not param
        if param.grad is None:
            assert other.grad is None, f"{pname}: compiled run has a gradient, eager has none"
            continue
        assert other.grad is not None, f"{pname}: no gradient in the compiled run"
        torch.testing.assert_close(other.grad, param.grad, rtol=0, atol=0, msg=lambda m: f"grad of {pname}: {m}")
        with_grad += 1
    assert with_grad > 0
    # BatchNorm running statistics (train mode) must be updated identically.
    eager_buffers = dict(eager_model.named_buffers())
    compiled_buffers = dict(compiled_model.named_buffers())
    assert list(compiled_buffers) == list(eager_buffers)
    for bname, buffer in eager_buffers.items():
        torch.testing.assert_close(compiled_buffers[bname], buffer, rtol=0, atol=0,
                                   msg=lambda m: f"buffer {bname}: {m}")


class _AtenOpCounter(TorchDispatchMode):
    """Counts aten ops by name, split by whether one of ember's captured graphs is running."""

    def __init__(self, state: dict) -> None:
        super().__init__()
        self.state = state
        self.inside: Counter = Counter()
        self.outside: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if self.state["in_graph"]:
            self.inside[name] += 1
        else:
            self.outside[name] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_all_tensor_ops_run_inside_captured_graphs(name):
    """On a cached call, no aten op of the model may run outside ember's graphs.

    Outputs equal to eager do not show that ember captured anything: a submodule or frame
    that runs as plain Python gives the same numbers. Here the second (cached) call runs
    under a TorchDispatchMode that counts aten ops, and a backend marks when a captured
    graph is running; every op must be inside one.
    """
    state = {"in_graph": 0}

    def tracking_backend(gm, example_inputs):
        def run(*inputs):
            state["in_graph"] += 1
            try:
                return gm.forward(*inputs)
            finally:
                state["in_graph"] -= 1

        return run

    model = make_model(name, train=False)
    compiled = ember.compile(model, backend=tracking_backend)
    with torch.no_grad():
        args, kwargs = make_inputs(name, seed=1)
        compiled(*args, **kwargs)  # capture
        counts = ember_counts()
        reasons = dict(ember.counters["graph_break"])
        args, kwargs = make_inputs(name, seed=2)
        counter = _AtenOpCounter(state)
        with counter, ember.config.patch(compiled_under_dispatch_modes=True):
            actual = compiled(*args, **kwargs)
        expected = model(*args, **kwargs)
    assert_outputs_equal(actual, expected)
    n_inside, n_outside = sum(counter.inside.values()), sum(counter.outside.values())
    print(f"[ember coverage] {name}: {n_inside} aten ops inside graphs, {n_outside} outside "
          f"({dict(counter.outside.most_common(8))})")
    assert ember_counts()["captures"] == counts["captures"], "the second call recaptured"
    assert n_inside > 0, f"no aten op ran inside a captured graph ({n_outside} outside)"
    assert n_outside == 0, (
        f"{n_outside} of {n_inside + n_outside} aten ops ran outside ember's graphs "
        f"{dict(counter.outside.most_common(10))}; ember made {counts['graphs']} graphs, {counts['breaks']} "
        f"graph breaks {reasons}, {counts['frames_run_eagerly']} frames run eagerly")
