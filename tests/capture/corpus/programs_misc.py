"""Miscellany: f-strings/str.format, global reads and writes, print(), math, .item()/
.tolist(), grad-mode calls, torch.Size/dtype/device queries, builtins, walrus, context
managers, user-raised exceptions, RNG seeded by the harness."""
import contextlib
import math

import torch
import torch.nn.functional as F

from .registry import args, flip, pick, program, randint, randn, tensors


@program(lambda s: args(randn(3, pick(s, [4, 5])), s, pick(s, [0.5, 3.14159])))
def fstrings(x, n, v):
    s = f"shape={tuple(x.shape)} n={n:03d} v={v:.2f} {n!r} {'yes' if n % 2 else 'no'}"
    return x * len(s), s


@program(lambda s: args(randn(3), pick(s, [3, 11, 250])))
def str_format(x, n):
    a = "{}-{}".format(n, "a")
    b = "{name}:{val:>5.1f}".format(name="k", val=n / 3)
    c = "%d items, %.3f" % (n, n / 7)
    return x + len(a + b + c), a, b, c


@program(tensors((3, 4), vary=True))
def tensor_metadata_strings(x):
    return str(x.dtype), f"{x.shape}", str(x.device), repr(x.size()), f"{x.ndim}d", x + 1


@program(lambda s: args(randn(3), pick(s, ["a,b,c", "hello,world", "x"])))
def string_methods(x, text):
    parts = text.split(",")
    joined = "-".join(p.upper() for p in parts)
    return (x * len(parts), joined, text.startswith("h"), text.replace(",", ";"), text[::-1],
            text.find("o"), f"{text!r:>12}", text.count(","), " ".join([text] * 2).title())


SCALE = 2.5
OFFSETS = [1.0, -1.0, 0.5]
CONFIG = {"act": "relu", "depth": 2}


@program(tensors((3, 4)))
def global_reads(x):
    y = x * SCALE
    for i in range(CONFIG["depth"]):
        y = y + OFFSETS[i]
    return torch.relu(y) if CONFIG["act"] == "relu" else y


MODE = "relu"


def _set_mode(step):
    global MODE
    MODE = pick(step, ["relu", "relu", "tanh", "relu", "tanh", "sigmoid"])


@program(tensors((3,)), reset=_set_mode, state=lambda: MODE)
def global_read_changes_between_calls(x):
    return getattr(torch, MODE)(x), MODE


ACTIVATION = torch.relu


def _set_activation(step):
    global ACTIVATION
    ACTIVATION = pick(step, [torch.relu, torch.relu, torch.tanh, lambda t: t * 2])


@program(tensors((3,)), reset=_set_activation)
def global_function_swapped(x):
    return ACTIVATION(x) + 1


COUNTER = 0


def _reset_counter(step):
    global COUNTER
    COUNTER = step


@program(tensors((3,)), reset=_reset_counter, state=lambda: COUNTER)
def global_counter_write(x):
    global COUNTER
    COUNTER += 1
    if COUNTER > 3:
        COUNTER = 0
    return x * COUNTER


LAST = None


def _reset_last(step):
    global LAST
    LAST = None if step % 3 == 0 else torch.tensor(float(step))


@program(tensors((3,)), reset=_reset_last, state=lambda: LAST)
def global_tensor_write(x):
    global LAST
    prev = LAST
    LAST = x.sum()
    return x if prev is None else x + prev


HISTORY = []


def _reset_history(step):
    HISTORY[:] = [float(i) for i in range(step % 3)]


@program(tensors((3,)), reset=_reset_history, state=lambda: HISTORY)
def global_list_append(x):
    HISTORY.append(x.mean().item())
    HISTORY.append(len(HISTORY))
    return x - HISTORY[0]


REGISTRY = {}


def _reset_registry(step):
    REGISTRY.clear()
    if step % 2:
        REGISTRY["count"] = 10


@program(lambda s: args(randn(3), pick(s, ["a", "b", "a"])), reset=_reset_registry,
         state=lambda: REGISTRY)
def global_dict_mutation(x, key):
    REGISTRY[key] = x * 2
    REGISTRY.setdefault("count", 0)
    REGISTRY["count"] += 1
    return sorted(REGISTRY)


class _Stats:
    def __init__(self):
        self.calls = 0
        self.total = torch.zeros(())


STATS = _Stats()


def _reset_stats(step):
    STATS.calls = step % 2
    STATS.total = torch.zeros(())


@program(tensors((3,)), reset=_reset_stats, state=lambda: (STATS.calls, STATS.total))
def global_object_mutation(x):
    STATS.calls += 1
    STATS.total = STATS.total + x.sum()
    return STATS.total * STATS.calls


RUNNING = torch.zeros(3)


def _reset_running(step):
    RUNNING.copy_(torch.arange(3.0) * step)


@program(tensors((3,)), reset=_reset_running, state=lambda: RUNNING)
def global_tensor_inplace(x):
    RUNNING.mul_(0.9).add_(x)
    return RUNNING.clone()


@program(tensors((3, 4)))
def print_calls(x):
    print("sum:", x.sum())
    print(f"shape {tuple(x.shape)}")
    y = x * 2
    print(y.mean().item(), end="\n")
    return y


@program(lambda s: args(randn(3), pick(s, [2, 0, 3])))
def print_in_loop(x, n):
    acc = x
    for i in range(n):
        print("iter", i, acc.shape)
        acc = acc + i
    return acc


@program(lambda s: args(randn(3), pick(s, [0.5, 2.0, 9.0]), pick(s, [3, 4, 10])))
def math_module(x, f, n):
    return (x * math.sqrt(f) + math.exp(-f), math.cos(f), math.ceil(f), math.isclose(f, 2.0),
            math.inf > f, math.factorial(n), math.gcd(n, 6), math.comb(n, 2), math.hypot(f, n),
            math.isfinite(f), math.log2(n), math.degrees(f), math.fsum([f, n, 0.1]),
            math.copysign(f, -1), math.trunc(-f))


@program(tensors((3, 4)))
def math_on_item(x):
    v = x.abs().sum().item()
    return math.sqrt(v), x / math.sqrt(v), math.floor(v * 10), math.log1p(v)


@program(tensors((2, 3)))
def tolist_and_numbers(x):
    return (x.tolist(), x[0].tolist(), x.sum().tolist(), int(x[0, 0] * 10), float(x[1, 1]),
            bool(x[0, 1] > 0))


@program(tensors((3, 2), vary=True))
def len_and_iterate_tensor(x):
    rows = [r * i for i, r in enumerate(x)]
    return len(x), rows, list(x.shape), x.size(), tuple(x.unbind(1))


@program(lambda s: args(randn(3, requires_grad=True)))
def set_grad_enabled_call(x):
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    y = x * 2
    mid = torch.is_grad_enabled()
    torch.set_grad_enabled(prev)
    z = x * 3
    return y, z, mid, y.requires_grad, z.requires_grad


@program(lambda s: args(randn(3, requires_grad=True), not flip(s)))
def grad_mode_left_disabled(x, disable):
    # Leaves grad mode off for the caller when `disable`: the harness compares the mode.
    if disable:
        torch.set_grad_enabled(False)
    return x * 2


@program(tensors((3,)))
def inference_mode_block(x):
    with torch.inference_mode():
        y = x * 2
        inside = torch.is_inference_mode_enabled()
    return y, y.is_inference(), inside, torch.is_inference_mode_enabled()


@program(tensors((3, 4), vary=True))
def torch_size_ops(x):
    s = x.shape
    return (s + (1,), s[1:], torch.Size([2, *s]), s.numel(), x.new_zeros(s[::-1]),
            list(s) == [x.size(0), x.size(1)], s == (x.size(0), x.size(1)))


@program(lambda s: args(pick(s, [randn(3), randint(0, 5, (3,)), randn(3) > 0, randn(3).double()])))
def dtype_predicates(x):
    return (x.is_floating_point(), x.dtype.is_floating_point, torch.is_tensor(x),
            torch.is_floating_point(x), x.dtype in (torch.float32, torch.float64),
            x.element_size(), x.to(torch.float32) * 2, x.dtype.itemsize)


@program(tensors((3,)))
def device_checks(x):
    dev = x.device
    y = x.to(dev) if dev.type == "cpu" else x.cpu()
    return y * 2, dev.type, str(dev), torch.zeros(2, device=dev), dev == torch.device("cpu"), x.is_cpu


@program(lambda s: args(randn(3), pick(s, [7, -3, 10]), pick(s, [2.5, -1.25])))
def python_builtins(x, n, f):
    q, r = divmod(n, 3)
    return (x * abs(n), abs(f), min(n, 2, 5), max(f, 0.0), round(f), round(f, 1), pow(2, abs(n)),
            n ** 2, n / 4, n // 4, -n % 5, q, r, int(f), float(n), bool(n), hex(abs(n)),
            chr(65 + abs(n) % 26), ord("a"), bin(abs(n)), int("12") + n)


@program(tensors((3,), (3,)))
def builtin_max_on_tensors(x, y):
    a = max(x.sum(), y.sum())
    b = min(x.sum(), y.sum(), torch.tensor(0.0))
    return a, b, abs(x), sum(x.tolist()), -x


@program(tensors((4, 3)))
def walrus_operator(x):
    if (s := x.sum()) > 0:
        y = x * s
    else:
        y = x - s
    vals = [v for t in x if (v := t.max().item()) > 0]
    return y, s, vals


@program(lambda s: args(randn(3, 4), pick(s, [randn(4), None, None, randn(4)])))
def optional_argument(x, bias):
    if bias is None:
        return x, bias is None
    return x + bias, False


@program(tensors((3, 4)))
def seeded_rng_inside(x):
    torch.manual_seed(1234)
    noise = torch.randn(x.shape)
    return x + noise, torch.rand(2)


@program(tensors((3, 4)))
def rng_dropout_harness_seeded(x):
    # Unseeded RNG: relies on the harness seeding torch identically before both runs.
    return F.dropout(x, p=0.5, training=True), torch.randn(3)


@program(lambda s: args(randn(3), pick(s, [1, 2.5, "s", [1]])))
def type_names(x, v):
    return type(v).__name__, type(x).__name__, type(x.shape).__name__, type(x.dtype).__name__, x * 1


@program(lambda s: args([randn(2) for _ in range(3)], pick(s, [1, 5, -1, 3])))
def index_error_caught(xs, i):
    try:
        return xs[i] * 2, "ok"
    except IndexError as e:
        return torch.zeros(2), str(e)


@program(lambda s: args({"a": randn(2), "b": randn(2)}, pick(s, ["a", "b", "c"])))
def key_error_raised(d, key):
    return d[key] + 1


@program(lambda s: args(randn(3), pick(s, [2, "s", 1.5, None])))
def type_error_on_bad_input(x, v):
    if not isinstance(v, (int, float)):
        raise TypeError(f"expected number, got {type(v).__name__}")
    return x * v


class CorpusError(Exception):
    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code


@program(lambda s: args(randn(3), s))
def custom_exception(x, n):
    try:
        if n > 2:
            raise CorpusError(f"too big: {n}", n)
        r = x
    except CorpusError as e:
        r = x * e.code
    if n > 4:
        raise CorpusError("fatal", n)
    return r


class _Tracker:
    def __init__(self):
        self.events = []

    def __enter__(self):
        self.events.append("enter")
        return self

    def __exit__(self, et, ev, tb):
        self.events.append("exit:" + (et.__name__ if et else "none"))
        return et is KeyError


@program(lambda s: args(randn(3), not flip(s)))
def user_context_manager(x, fail):
    t = _Tracker()
    y = x * 2
    with t:
        y = x * 2
        if fail:
            raise KeyError("suppressed")
        y = y + 1
    return y, t.events


@contextlib.contextmanager
def _scoped(log, name):
    log.append("in " + name)
    try:
        yield len(log)
    finally:
        log.append("out " + name)


@program(tensors((3,)))
def contextmanager_decorator(x):
    log = []
    with _scoped(log, "a") as n:
        with _scoped(log, "b") as m:
            y = x * (n + m)
    return y, log


@program(lambda s: args(randn(4), [0.5 * i + s for i in range(4)]))
def item_index_python_list(x, table):
    i = int(x.argmax().item())
    return table[i], x[i], i


@program(lambda s: args(randn(3), s))
def assert_with_fstring_message(x, n):
    assert n % 3 != 2, f"step {n} is forbidden ({n % 3})"
    return x + n
