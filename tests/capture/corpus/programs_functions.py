"""Functions: closures (incl. nonlocal), *args/**kwargs, keyword-only and positional-only
parameters, defaults, lambdas, functools.partial/reduce, decorators, higher-order functions,
recursion through helpers."""
import functools
import operator

import torch

from .registry import args, pick, program, randn, tensors


@program(lambda s: args(randn(3), pick(s, [2, 3])))
def closure_reads_local(x, k):
    scale = k * 2

    def inner(y):
        return y * scale + k

    return inner(x), inner(x + 1)


@program(tensors((3,), (3,)))
def closure_captures_tensor(x, y):
    def add_y(t):
        return t + y

    return add_y(x), add_y(add_y(x))


@program(lambda s: args(randn(3), pick(s, [1, 3, 0, 2])))
def nonlocal_counter(x, n):
    count = 0

    def inc():
        nonlocal count
        count += 1
        return count

    for _ in range(n):
        inc()
    return x * count, count


@program(lambda s: args([randn(3) for _ in range(pick(s, [2, 4]))]))
def nonlocal_tensor_accumulator(xs):
    acc = torch.zeros(3)

    def add(t):
        nonlocal acc
        acc = acc + t

    for t in xs:
        add(t)
    return acc


@program(tensors((3,)))
def nonlocal_two_levels(x):
    total = 0

    def outer():
        def inner():
            nonlocal total
            total += 2

        inner()
        inner()

    outer()
    return x + total, total


@program(tensors((3,)))
def closure_sees_later_rebinding(x):
    k = 1
    f = lambda t: t * k  # noqa: E731
    a = f(x)
    k = 5
    return a, f(x)


def make_scaler(k):
    def scale(t):
        return t * k

    return scale


DOUBLE = make_scaler(2.0)


@program(lambda s: args(randn(3), pick(s, [1.5, -2.0])))
def closure_factory(x, k):
    triple = make_scaler(3)
    custom = make_scaler(k)
    return DOUBLE(x), triple(x), custom(x)


@program(tensors((3,)))
def nested_closures(x):
    a = 1

    def f1():
        b = 2

        def f2():
            c = 3

            def f3(t):
                return t * a + b * c

            return f3

        return f2()

    return f1()(x)


@program(tensors((3,)))
def closure_mutates_captured_list(x):
    seen = []

    def record(t):
        seen.append(t.sum())
        return t * 2

    y = record(record(x))
    return y, seen, len(seen)


def _sum_all(*args):
    total = args[0]
    for a in args[1:]:
        total = total + a
    return total, len(args)


@program(tensors((3,), (3,), (3,)))
def varargs_helper(x, y, z):
    return _sum_all(x, y, z), _sum_all(*[x, y]), _sum_all(x)


def _double_kwargs(**kw):
    return {k: v * 2 for k, v in sorted(kw.items())}


@program(tensors((3,), (3,)))
def kwargs_helper(x, y):
    opts = {"beta": y}
    return _double_kwargs(alpha=x, **opts), _double_kwargs()


@program(lambda s: (tuple(randn(2) for _ in range(pick(s, [1, 2, 3, 2]))), {}))
def program_star_args(*xs):
    return torch.stack(xs).sum(0), len(xs)


@program(lambda s: ((randn(3),), pick(s, [{"a": 1.0}, {"a": 2.0, "b": randn(3)}, {}])))
def program_star_kwargs(x, **kw):
    out = x
    for k in sorted(kw):
        out = out * kw[k] if k == "a" else out + kw[k]
    return out, sorted(kw)


@program(lambda s: ((randn(3),), {"scale": pick(s, [2.0, 0.5])} if s % 3
                    else {"scale": 1.0, "shift": float(s)}))
def keyword_only_args(x, *, scale, shift=0.0):
    return x * scale + shift


@program(lambda s: pick(s, [((randn(3),), {}), ((randn(3), 3), {}),
                            ((randn(3),), {"mode": "mul"}), ((randn(3), 4, "mul"), {})]))
def default_args(x, n=2, mode="add"):
    return x + n if mode == "add" else x * n


def _remember(v, memo=[]):  # noqa: B006  (the shared default is the point)
    memo.append(v)
    return len(memo)


def _reset_memo(step):
    _remember.__defaults__[0][:] = [0.0] * (step % 2)


def _memo_state():
    return list(_remember.__defaults__[0])


@program(tensors((3,)), reset=_reset_memo, state=_memo_state)
def mutable_default_argument(x):
    _remember(x.sum().item())
    n = _remember(2.0)
    return x * n


@program(lambda s: args(randn(3), pick(s, [2, 5])))
def lambdas(x, k):
    f = lambda a, b=2: a * b  # noqa: E731
    g = lambda *a: sum(a)  # noqa: E731
    h = lambda t: (lambda u: u + t)  # noqa: E731
    return f(x), f(x, k), g(1, 2, k), h(x)(x)


def _affine(t, scale=1.0, shift=0.0):
    return t * scale + shift


@program(tensors((3,), (3,)))
def functools_partial(x, y):
    add2 = functools.partial(torch.add, alpha=2)
    scaled = functools.partial(_affine, scale=3.0)
    return (add2(x, y), scaled(x), scaled(x, shift=1.0),
            functools.partial(scaled, shift=-1.0)(y))


CLAMP01 = functools.partial(torch.clamp, min=0.0, max=1.0)


@program(tensors((3, 4)))
def module_level_partial(x):
    return CLAMP01(x), CLAMP01.keywords["max"], CLAMP01.func is torch.clamp


def _traced(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        out = fn(*a, **k)
        return out + 1

    return wrapper


@_traced
def _square(t):
    return t * t


@program(tensors((3,)))
def user_decorator(x):
    return _square(x), _square.__name__, _square.__wrapped__(x)


def _apply_n(fn, x, n):
    for _ in range(n):
        x = fn(x)
    return x


@program(lambda s: args(randn(3), pick(s, [torch.sin, torch.tanh, torch.relu]),
                        pick(s, [1, 2, 3, 0])))
def higher_order_function(x, fn, n):
    return _apply_n(fn, x, n), _apply_n(lambda t: t * 2, x, n)


def _is_even(n, t):
    return t if n == 0 else _is_odd(n - 1, t + 1)


def _is_odd(n, t):
    return t * -1 if n == 0 else _is_even(n - 1, t * 2)


@program(lambda s: args(randn(3), pick(s, [0, 1, 4, 5])))
def mutual_recursion(x, n):
    return _is_even(n, x)


def _collect_halves(t, out):
    out.append(t.sum())
    if t.shape[0] > 1:
        half = t.shape[0] // 2
        _collect_halves(t[:half], out)
        _collect_halves(t[half:], out)
    return out


@program(lambda s: args(randn(pick(s, [4, 5, 8, 3]))))
def recursive_divide(x):
    return _collect_halves(x, [])


@program(lambda s: args(randn(3), pick(s, [3, 0, 5])))
def local_recursive_function(x, n):
    def rec(t, k):
        if k <= 0:
            return t
        return rec(t + k, k - 1)

    return rec(x, n)


@program(tensors((3, 4)))
def torch_calls_with_kwargs(x):
    return (torch.sum(x, dim=1, keepdim=True), torch.mean(input=x, dim=0), x.sum(dim=(0, 1)),
            torch.cumsum(x, dim=-1), torch.max(x, dim=0, keepdim=True).values)


def _target(a, b=1.0, *rest, c=0.0, **extra):
    out = a * b + c
    for r in rest:
        out = out + r
    return out, len(extra)


def _forward(*a, **k):
    return _target(*a, **k)


@program(tensors((3,), (3,)))
def forwarding_wrapper(x, y):
    return _forward(x), _forward(x, 2.0, y, y, c=1.0), _forward(a=x, b=y, zz=3)


@program(lambda s: args(randn(3), pick(s, ["sin", "cos", "exp", "sin"])))
def getattr_torch_function(x, name):
    fn = getattr(torch, name)
    method = getattr(x, name)
    return fn(x), method(), name.upper()


def _posonly(a, b, /, c=1, *, d=2):
    return a * b + c * d


@program(tensors((3,), (3,)))
def positional_only_params(x, y):
    return _posonly(x, y), _posonly(x, y, 3, d=4), _posonly(x, 2, c=y)


@program(tensors((3,)))
def lambda_loop_binding(x):
    early = [lambda t, i=i: t * i for i in range(3)]
    late = [lambda t: t * i for i in range(3)]
    return [f(x) for f in early], [f(x) for f in late]


@program(lambda s: args([randn(3) for _ in range(pick(s, [2, 3, 4]))]))
def reduce_and_operator(xs):
    total = functools.reduce(operator.add, xs)
    prod = functools.reduce(operator.mul, xs, torch.ones(3))
    getter = operator.itemgetter(0, -1)
    return total, prod, getter(xs), operator.neg(total), list(map(operator.mul, xs, xs))


@program(tensors((3, 4)))
def operator_getters(x):
    shape = operator.attrgetter("shape")(x)
    t = operator.methodcaller("sum", dim=0)(x)
    return shape, t, operator.getitem(x, 1), operator.iadd(x.clone(), 1)


@program(lambda s: args(randn(3), pick(s, [2, 3])))
def generator_closure(x, n):
    scale = 0.5

    def gen():
        for i in range(n):
            yield x * scale * i

    return list(gen()), sum(1 for _ in gen())


def _norm(t, *, p=2.0, dim=None):
    return t.abs().pow(p).sum() if dim is None else t.abs().pow(p).sum(dim)


@program(lambda s: args(randn(2, 3), pick(s, [{"p": 1.0}, {"p": 2.0, "dim": 0}, {}])))
def kwargs_dict_unpack(x, opts):
    return _norm(x, **opts), _norm(x, **{**opts, "p": 3.0})


_DEFAULT_SCALE = 4.0


def _scaled(t, s=_DEFAULT_SCALE):
    return t * s


@program(tensors((3,)))
def default_from_module_constant(x):
    return _scaled(x), _scaled(x, 0.5)


_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "max": torch.maximum}


@program(lambda s: args(randn(3), randn(3), pick(s, ["add", "max", "sub", "add"])))
def dispatch_table(x, y, op):
    return _OPS[op](x, y), sorted(_OPS)


@program(tensors((3,)))
def function_attributes(x):
    return (x * len(_affine.__name__), callable(_affine), _affine.__defaults__,
            _affine.__code__.co_argcount, callable(3))


@program(lambda s: args(randn(4), pick(s, [1, 2, 3])))
def default_arg_closure_in_loop(x, n):
    fns = []
    for i in range(n):
        def f(t, i=i, base=x):
            return t * i + base
        fns.append(f)
    return [f(x) for f in fns]


@program(lambda s: args(randn(3), pick(s, [0.5, -2.0, 3.0])))
def closure_over_local_then_break(x, scale):
    offset = x.mean()

    def shift(v):
        return v * scale - offset

    y = shift(x)
    if y.sum().item() > 0:  # data-dependent branch: a graph break after the closure exists
        return shift(y), "positive"
    return shift(-y), "negative"


@program(lambda s: args(randn(3), pick(s, [1, 2, 3])))
def partial_introspection(x, k):
    p = functools.partial(torch.add, alpha=k)
    q = functools.partial(p, x)
    return q(x), hasattr(q, "func"), hasattr(q, "nope"), q.keywords, len(q.args)
