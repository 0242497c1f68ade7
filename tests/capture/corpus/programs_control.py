"""Control flow: data-dependent branches, loops, recursion, exceptions, asserts,
generators, match, and grad-mode blocks."""
import torch

from .registry import args, flip, pick, program, randn, signed, tensors


@program(lambda s: args(signed(s, 4, 5)))
def branch_on_sum(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


@program(lambda s: args(randn(4, 5) + pick(s, [-3.0, 0.0, 3.0, 0.0, 3.0, -3.0])))
def branch_three_way(x):
    m = x.mean()
    if m > 1:
        y = x.exp()
    elif m < -1:
        y = x.abs()
    else:
        y = x.sin()
    return y, m


@program(lambda s: args(randn(4, 5), flip(s)))
def branch_on_flag(x, flag):
    if flag:
        x = x + 1
    else:
        x = x * 3
    return x, not flag


@program(lambda s: args(randn(4, 5), pick(s, [0, 1, 5, 2, 0, 7])))
def branch_on_int(x, n):
    if n == 0:
        return x
    elif n < 3:
        return x * n
    else:
        return x ** 2 - n


@program(lambda s: args(randn(4, 5), pick(s, [1, 3, 2, 4, 0, 3])))
def loop_accumulate(x, n):
    acc = torch.zeros_like(x)
    for i in range(n):
        acc = acc + x * i
        acc += 1
    return acc


@program(lambda s: args(randn(4, 5) * pick(s, [1.0, 10.0, 100.0, 0.5])))
def while_halving(x):
    count = 0
    while x.abs().max() > 1:
        x = x / 2
        count += 1
    return x, count


@program(lambda s: args(randn(3), pick(s, [3, 5, 1, 0])))
def while_counter(x, n):
    i = 0
    out = []
    while i < n:
        out.append(x * i)
        i += 1
    return out, i


@program(lambda s: args(randn(4, 5), pick(s, [2, 5, 7, 0])))
def break_continue(x, n):
    acc = x.new_zeros(5)
    for i in range(10):
        if i % 2:
            continue
        if i > n:
            break
        acc = acc + x[i % 4]
    return acc, i


@program(tensors((6, 3)))
def break_on_tensor(x):
    acc = torch.zeros(3)
    steps = 0
    for row in x:
        if row.sum() < -1:
            break
        acc = acc + row
        steps += 1
    return acc, steps


def _repeat_affine(x, depth):
    if depth == 0:
        return x
    return _repeat_affine(x * 2 + 1, depth - 1)


@program(lambda s: args(randn(3, 4), pick(s, [0, 1, 3, 2, 5])))
def recursion_depth(x, depth):
    return _repeat_affine(x, depth)


def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


@program(lambda s: args(randn(4), pick(s, [1, 5, 8, 3])))
def recursion_fib(x, n):
    return x * _fib(n), _fib(n)


def _tree_sum(node):
    if isinstance(node, torch.Tensor):
        return node.sum()
    return sum(_tree_sum(c) for c in node)


@program(lambda s: args([randn(2), [randn(3), (randn(1), randn(2))], randn(2)]
                        if s % 2 == 0 else [randn(4), (randn(2),)]))
def recursion_tree(tree):
    return _tree_sum(tree)


@program(tensors((4, 5)))
def try_except_caught(x):
    try:
        y = x * 2
        raise ValueError("bad value")
    except ValueError as e:
        y = x + len(str(e))
        msg = str(e)
    return y, msg


@program(tensors((4, 5)))
def try_else_finally(x):
    log = []
    try:
        y = x * 2
        log.append("try")
    except RuntimeError:
        log.append("except")
        y = x
    else:
        log.append("else")
        y = y + 1
    finally:
        log.append("finally")
        y = y * 3
    return y, log


@program(lambda s: args(signed(s, 4, 5)))
def try_raise_data_dependent(x):
    try:
        if x.sum() > 0:
            raise KeyError("positive")
        y, tag = -x, "none"
    except KeyError as e:
        y, tag = x * 2, e.args[0]
    return y, tag


@program(lambda s: args(randn(3), pick(s, [2, -1, 3, 0, -5, 1])))
def raises_value_error(x, n):
    if n < 0:
        raise ValueError(f"negative n: {n}")
    return x * n


def _mixed_or_negative(s):
    x = torch.rand(4) + 0.1
    return args(-x if s in (2, 5) else x - x.mean())


@program(_mixed_or_negative)
def raises_runtime_error_data_dependent(x):
    if (x < 0).all():
        raise RuntimeError("all negative: " + str(x.shape[0]))
    return x.relu()


@program(lambda s: args(randn(4, 5), pick(s, [1, 2, 0, 3, -1, 2])))
def assert_python(x, n):
    assert x.shape[0] == 4, "bad shape"
    assert n >= 0, f"n must be non-negative, got {n}"
    return x + n


def _maybe_inf(s):
    x = randn(4, 5)
    if s == 3:
        x[1, 2] = float("inf")
    return args(x)


@program(_maybe_inf)
def assert_tensor_condition(x):
    assert (x.abs() >= 0).all()
    assert x.isfinite().all(), "non-finite"
    return x * 2


def _scaled_gen(x, n):
    for i in range(n):
        yield x * i


@program(lambda s: args(randn(4, 5), pick(s, [3, 1, 4, 0])))
def generator_for_loop(x, n):
    acc = torch.zeros_like(x)
    for t in _scaled_gen(x, n):
        acc = acc + t
    return acc


def _pairs(xs):
    prev = None
    for x in xs:
        if prev is not None:
            yield prev + x
        prev = x


@program(lambda s: args([randn(3) for _ in range(pick(s, [3, 4, 2]))]))
def generator_to_list(xs):
    return list(_pairs(xs))


def _inner_gen(x):
    yield x
    yield x * 2
    return "done"


def _outer_gen(x):
    r = yield from _inner_gen(x)
    yield x * 3
    yield r


@program(tensors((2, 3)))
def generator_yield_from(x):
    return list(_outer_gen(x))


def _counter_gen(x):
    i = 0
    while True:
        yield x + i
        i += 1


@program(tensors((2, 3)))
def generator_next(x):
    g = _counter_gen(x)
    a = next(g)
    b = next(g)
    c = next(g)
    return a, b, c, next(iter([]), None)


@program(lambda s: args(randn(4, 5, requires_grad=True)))
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
        inner = torch.is_grad_enabled()
    z = x * 3
    return y, z, y.requires_grad, z.requires_grad, inner


@program(lambda s: args(randn(4, 5, requires_grad=True)))
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x + 1
        with torch.enable_grad():
            b = x * 2
        c = x - 1
    return a, b, c, [t.requires_grad for t in (a, b, c)]


@program(lambda s: args(randn(3, requires_grad=True), flip(s)))
def set_grad_enabled_block(x, enabled):
    with torch.set_grad_enabled(False):
        a = x * 2
    with torch.set_grad_enabled(enabled):
        b = x * 3
    return a, b, a.requires_grad, b.requires_grad


@torch.no_grad()
def _nograd_helper(x):
    return x * 2


@program(lambda s: args(randn(3, requires_grad=True)))
def no_grad_decorated_helper(x):
    y = _nograd_helper(x)
    return y, y.requires_grad, (x * 2).requires_grad


@program(lambda s: args(randn(3, requires_grad=True)))
def no_grad_exception_restores(x):
    try:
        with torch.no_grad():
            y = x * 2
            raise ValueError("inside")
    except ValueError:
        pass
    return y, torch.is_grad_enabled(), (x * 2).requires_grad


@program(lambda s: args(randn(4, 5), pick(s, [2, 3, 4]), pick(s, [5, 1, 3, 2])))
def nested_loops(x, a, b):
    acc = x.new_zeros(())
    for i in range(a):
        for j in range(b):
            acc = acc + x[i, j] * (i - j)
    return acc


@program(lambda s: args([randn(3) for _ in range(pick(s, [2, 3, 5, 1]))]))
def loop_over_list(xs):
    out = xs[0]
    for t in xs[1:]:
        out = out * 0.5 + t
    return out


@program(lambda s: args(randn(5, 3) * pick(s, [1.0, 1.0, 0.2])))
def early_return_in_loop(x):
    for i, row in enumerate(x):
        if row.max() > 1.0:
            return i, row
    return -1, None


@program(lambda s: args(randn(4), pick(s, [2, 10, 3, 99])))
def for_else(x, target):
    for i in range(5):
        if i == target:
            found = True
            break
    else:
        found = False
    return x * (2 if found else 3), found


@program(lambda s: args(randn(4) * pick(s, [0.01, 1000.0, 1.0])))
def while_else_break(x):
    n = 0
    while n < 5:
        if x.abs().sum() > 100:
            break
        x = x * 3
        n += 1
    else:
        x = x - 1
    return x, n


@program(lambda s: args(randn(4), randn(4),
                        pick(s, ["add", "mul", "other", "add", ("pow", 2), ("pow", 3)])))
def match_statement(x, y, mode):
    match mode:
        case "add":
            return x + y
        case "mul":
            return x * y
        case ("pow", k):
            return x ** k
        case _:
            return x - y


@program(lambda s: args(randn(3, 4, dtype=pick(s, [torch.float32, torch.float64]))))
def branch_on_dtype(x):
    if x.dtype == torch.float32:
        return x * 2, "f32"
    elif x.dtype is torch.float64:
        return x.float(), "f64"
    return x, "other"


@program(tensors((3, 4), vary=True))
def branch_on_shape(x):
    if x.shape[0] > 4:
        return x[:4] * 2
    return x.sum(0)


def _checked_div(x, d):
    if d == 0:
        raise ZeroDivisionError("division by zero in helper")
    return x / d


@program(lambda s: args(randn(4), pick(s, [2, 0, 4, 0, 1, 5])))
def helper_exception_caught(x, d):
    try:
        return _checked_div(x, d), "ok"
    except ZeroDivisionError as e:
        return x, str(e)


@program(lambda s: args(randn(4), pick(s, [2, 0, 4, 1, 0, 5])))
def reraise_as_value_error(x, d):
    try:
        r = 1 / d
    except ZeroDivisionError as e:
        raise ValueError(f"bad divisor {d}") from e
    return x * r


@program(lambda s: args(torch.rand(4) + 0.05))
def while_item_threshold(x):
    total = 0.0
    acc = torch.zeros_like(x)
    iters = 0
    while total < 3.0 and iters < 50:
        acc = acc + x
        total = acc.sum().item()
        iters += 1
    return acc, total, iters


@program(lambda s: args(randn(3), ["prev"] * (s % 3)))
def finally_runs_on_return(x, log):
    try:
        log.append("start")
        return x * 2
    finally:
        log.append("finally")


@program(lambda s: args(randn(4, 5), randn(4, pick(s, [5, 5, 3, 5, 1, 2]))))
def torch_shape_error(x, y):
    return x + y
