"""Containers: comprehensions, generator expressions, list/dict/set mutation, unpacking,
builtin iteration helpers, namedtuples, collections, nested return structures."""
from collections import Counter, OrderedDict, defaultdict, deque, namedtuple
from typing import NamedTuple

import torch

from .registry import args, pick, program, randn, tensors


@program(tensors((4, 5), vary=True))
def list_comprehension(x):
    rows = [x[i] * i for i in range(x.size(0))]
    return torch.stack(rows), len(rows)


@program(tensors((6, 3)))
def list_comprehension_filter(x):
    pos = [r for r in x if r.sum() > 0]
    return len(pos), pos


@program(tensors((3, 4)))
def dict_comprehension(x):
    d = {f"row{i}": x[i] * 2 for i in range(3)}
    inv = {k: v.sum() for k, v in d.items() if k != "row1"}
    return d, inv


@program(lambda s: args(randn(4), pick(s, [[1, 2, 2, 3], [5, 5], [0, 1, 4, 1, 0]])))
def set_comprehension(x, ints):
    s = {v % 3 for v in ints}
    return x * len(s), sorted(s), 2 in s


@program(tensors((4, 5)))
def generator_expression_sum(x):
    total = sum(x[i] * i for i in range(4))
    mx = max(float(v) for v in x[0])
    return total, mx


@program(lambda s: args(randn(4), pick(s, [[1, 2, 3], [0, -1], [5]])))
def any_all(x, ints):
    a = any(v > 2 for v in ints)
    b = all(v > 0 for v in ints)
    c = any(t.sum() > 0 for t in x.split(2))
    return x * (1 + a + 2 * b), a, b, c


@program(tensors((3,), (3,)))
def list_mutation_methods(x, y):
    l = [x]
    l.append(x + 1)
    l.extend([x * 2, x * 3])
    l.insert(1, y)
    p = l.pop()
    q = l.pop(0)
    del l[0]
    l += [y - 1]
    return l, p, q, len(l)


@program(tensors((3,), (3,)))
def list_slice_assignment(x, y):
    l = [x, y, x + y, x - y, x * y]
    l[1:3] = [x * 10]
    l[::2] = [y * 0, y * 1]
    del l[1:2]
    l[len(l):] = [x]
    return l


@program(lambda s: args([randn(3) for _ in range(pick(s, [3, 4, 2]))]))
def mutate_input_list(xs):
    xs.append(xs[0] * 2)
    first = xs.pop(0)
    xs[0] = xs[0] + first
    xs.reverse()


@program(tensors((3,), (3,)))
def dict_mutation_methods(x, y):
    d = {"a": x}
    d["b"] = y
    d.update(c=x * y)
    d.update({"z": y + 1})
    d.setdefault("a", y)
    e = d.setdefault("e", x + 1)
    del d["b"]
    v = d.pop("c")
    missing = d.pop("nope", None)
    return d, v, e, missing, list(d)


@program(lambda s: args({"x": randn(3), "y": randn(3), "n": s}))
def mutate_input_dict(d):
    d["sum"] = d["x"] + d["y"] * d["n"]
    d.pop("y")
    d["x"].mul_(2)
    return sorted(d.keys())


def _dict_input(s):
    d = {"b": randn(2), "a": randn(2), "c": randn(2)}
    if s % 2:
        d["dd"] = randn(2)
    return args(d)


@program(_dict_input)
def dict_iteration(d):
    out = []
    for k in sorted(d):
        out.append(d[k] * len(k))
    total = sum(v.sum() for v in d.values())
    items = [(k, v + 1) for k, v in d.items()]
    return out, total, items, d.get("zz", -1), "a" in d, "dd" in d


@program(lambda s: args(randn(3), pick(s, [[1, 2, 3], [2, 4], [0, 5, 6, 7]]), s))
def set_operations(x, ints, n):
    s = set(ints)
    s.add(n)
    s.discard(0)
    u = s | {1, 2}
    i = s & {2, 3, 4}
    d = s - {1}
    return x * len(s), sorted(u), sorted(i), sorted(d), frozenset(i), len(s ^ {5})


@program(lambda s: args(randn(pick(s, [3, 4, 5]), 2)))
def star_unpacking(x):
    a, *b = x.unbind(0)
    first, *mid, last = list(range(x.size(0)))
    *init, tail = x
    return a, b, mid, first, last, tail, len(init)


@program(tensors((3,), (3,)))
def nested_unpacking(x, y):
    (a, b), c = (x, y), x + y
    [d, (e, f)] = [c, (a * 2, b * 2)]
    a, b = b, a
    return a, b, c, d, e, f


@program(lambda s: args([randn(3) for _ in range(3)],
                        [randn(3) for _ in range(pick(s, [3, 2, 4]))]))
def enumerate_zip(xs, ys):
    acc = torch.zeros(3)
    for i, (a, b) in enumerate(zip(xs, ys), start=1):
        acc = acc + i * a * b
    pairs = list(zip(range(10), "abc"))
    return acc, pairs, list(enumerate("xy"))


@program(lambda s: args([randn(2) for _ in range(3)],
                        [randn(2) for _ in range(pick(s, [3, 3, 2, 3, 4]))]))
def zip_strict(xs, ys):
    return [a + b for a, b in zip(xs, ys, strict=True)]


@program(lambda s: args(randn(6), pick(s, [4, 6, 1, 3])))
def range_reversed(x, n):
    acc = []
    for i in reversed(range(n)):
        acc.append(x[i])
    odd = list(range(1, n, 2))
    return acc, odd, list(reversed(odd)), range(n)[-1], len(range(0, n, 3))


@program(lambda s: args([randn(3) for _ in range(4)]))
def sorted_by_tensor_key(xs):
    by_sum = sorted(xs, key=lambda t: t.sum().item())
    by_max = sorted(xs, key=lambda t: float(t.max()), reverse=True)
    return by_sum, by_max


@program(lambda s: args(randn(2), pick(s, [[3, 1, 2], [5, -1, 5, 0], [7]])))
def sorted_min_max_sum(x, ints):
    return (sorted(ints, reverse=True), min(ints), max(ints), sum(ints), x * sum(ints),
            sorted("hello"), max(ints, key=lambda v: -v))


@program(lambda s: args([randn(3) for _ in range(pick(s, [3, 4]))]))
def map_filter(xs):
    relu = list(map(torch.relu, xs))
    pos = list(filter(lambda t: t.sum() > 0, xs))
    doubled = list(map(lambda a, b: a + b, xs, relu))
    return relu, pos, doubled, list(filter(None, [0, 1, "", "a"]))


Point = namedtuple("Point", ["x", "y"])


@program(tensors((3,), (3,)))
def namedtuple_basic(x, y):
    p = Point(x, y)
    q = p._replace(x=p.y * 2)
    return p, q, p.x + p.y, p[1], len(p), q._asdict(), Point._fields


Pair = namedtuple("Pair", "a b scale")


@program(lambda s: args(Pair(randn(3), randn(3), pick(s, [1.0, 2.5]))))
def namedtuple_input(p):
    a, b, scale = p
    return Pair(a * scale, b - scale, scale * 2), p.a * p.b, isinstance(p, tuple)


class Stats(NamedTuple):
    mean: torch.Tensor
    std: torch.Tensor
    count: int = 0


@program(tensors((4, 5), vary=True))
def typed_namedtuple(x):
    s = Stats(x.mean(0), x.std(0))
    t = Stats(x.mean(1), x.std(1), count=x.size(1))
    return s, t, s.count + t.count, t._replace(count=0)


@program(tensors((2,), (2,)))
def return_nested_structure(x, y):
    return {"a": [x + 1, (y, {"c": x + y})], "b": None, "c": ((), [], {})}


@program(lambda s: args(randn(4, 5), [float(s + i) for i in range(5)]))
def python_list_to_tensor(x, vals):
    t = torch.tensor(vals)
    return x + t, torch.tensor([len(vals), 2]), torch.as_tensor(vals[:2])


@program(lambda s: args(randn(3), pick(s, [[1, 2, 2, 3], [2, 5, 2], [4, 2]])))
def list_query_methods(x, ints):
    i = ints.index(2)
    c = ints.count(2)
    return x * (i + c), 3 in ints, 9 not in ints, len(ints), ints[-1]


@program(tensors((2,), (2,), (2,)))
def dict_views_and_constructor(a, b, c):
    keys = ["a", "b", "c"]
    d = dict(zip(keys, [a, b, c]))
    d2 = dict(d, extra=a * b)
    return list(d.keys()), list(d.values()), list(d2.items()), len(d2), dict.fromkeys(keys, 0)


@program(lambda s: args(randn(2), pick(s, [[3, 1, 2], [9, 8, 7, 1], [1]])))
def list_sort_inplace(x, ints):
    ints.sort()
    rev = list(ints)
    rev.reverse()
    ints.append(len(rev))
    return x * ints[0], rev


@program(tensors((2,), (2,)))
def tuple_concat_repeat(x, y):
    t = (x,) * 3 + (y,)
    l = [1, 2] * 2
    return t, l, t[1:], len(t), tuple([y, x]), list((x,))


@program(tensors((2,), (2,)))
def dict_merge(x, y):
    d1 = {"a": x, "b": 1}
    d2 = {"b": y, "c": 3}
    m = d1 | d2
    m2 = {**d2, **d1, "z": x + y}
    d1 |= {"q": 5}
    return m, m2, d1


@program(lambda s: args([randn(2, 3) for _ in range(pick(s, [2, 3]))], randn(2, 3)))
def star_unpack_calls(xs, y):
    c = torch.cat([*xs, y])
    s = torch.stack((y, *xs), dim=1)
    sizes = [*y.shape, 1]
    return c, s, y.reshape(*sizes), max(*sizes)


@program(lambda s: args(randn(3), pick(s, ["abca", "zzxy", "q"])))
def collections_types(x, word):
    cnt = Counter(word)
    dd = defaultdict(list)
    for i, ch in enumerate(word):
        dd[ch].append(i)
    od = OrderedDict(a=x, b=x * 2)
    od.move_to_end("a")
    dq = deque([x, x + 1], maxlen=3)
    dq.appendleft(x - 1)
    dq.append(x * 3)
    return cnt.most_common(1), dict(dd), od, list(dq), sum(cnt.values())


@program(lambda s: args([randn(2) for _ in range(pick(s, [4, 5, 3]))]))
def list_slicing(xs):
    return xs[1:], xs[::-1], xs[-2:], xs[::2], xs[:0]


@program(tensors((3, 4)))
def nested_comprehension(x):
    grid = [[x[i, j] * (i + j) for j in range(2)] for i in range(3)]
    flat = [v for row in grid for v in row]
    pairs = [(i, j) for i in range(3) for j in range(i)]
    return torch.stack(flat), pairs


@program(tensors((4,), (4,)))
def sum_with_start_and_tuples(x, y):
    pairs = [(x, 1), (y, 2), (x + y, 3)]
    total = sum((t * w for t, w in pairs), torch.zeros(4))
    weights = sum(w for _, w in pairs)
    return total, weights


def _flatten_any(o):
    if isinstance(o, torch.Tensor):
        return [o]
    if isinstance(o, dict):
        return [t for v in o.values() for t in _flatten_any(v)]
    if isinstance(o, (list, tuple)):
        return [t for v in o for t in _flatten_any(v)]
    return []


@program(lambda s: args(pick(s, [randn(3), [randn(3), randn(3)], {"a": randn(3), "b": (randn(2),)},
                                 (randn(3),)])))
def flatten_any_container(obj):
    ts = _flatten_any(obj)
    return torch.cat(ts) * len(ts), type(obj).__name__


@program(lambda s: args(randn(2), pick(s, [(1, 2), (1, 3), (0, 9)])))
def sequence_comparisons(x, pair):
    lt = pair < (1, 3)
    eq = list(pair) == [1, 2]
    return x * (2 if lt else 1), lt, eq, pair + (0,), max(pair, (1, 2))


@program(lambda s: args(randn(3), pick(s, [{"a": 1, "b": 2}, {"b": 5, "a": 0}, {"a": 1, "c": 3}])))
def dict_views_as_sets(x, d):
    expected = {"a": 0, "b": 0}
    same = d.keys() == expected.keys()
    return (x * len(d.keys() & {"a", "c"}), same, sorted(d.keys() - {"a"}), sorted(d.keys() | {"z"}),
            ("a", 1) in d.items(), d.items() == {("a", 1), ("b", 2)})


@program(tensors((3,), (3,)))
def tensors_as_dict_keys(x, y):
    z = x + y
    seen = {x: "x", z: "z"}
    members = {x, y}
    return [seen[t] for t in (z, x)], y in seen, z in members, len(members | {z}), seen[x] == "x"


@program(lambda s: args(randn(2, 3), pick(s, [2, 3, 4])))
def ordered_and_default_dicts(x, n):
    od = OrderedDict((f"k{i}", x[0] * i) for i in range(n))
    od.move_to_end("k0")
    groups = defaultdict(list)
    for i in range(n):
        groups[i % 2].append(x[1] * i)
    Pair = namedtuple("Pair", ["first", "last"])
    pair = Pair(next(iter(od.values())), od["k0"])
    return list(od), pair.first + pair.last, {k: torch.stack(v) for k, v in groups.items()}


@program(lambda s: args([randn(2) for _ in range(pick(s, [2, 3, 4]))]))
def itertools_pipelines(xs):
    import itertools

    total = sum(itertools.accumulate(xs))
    pairs = [a - b for a, b in itertools.pairwise(xs)]
    combos = [a * b for a, b in itertools.combinations(xs, 2)]
    head = list(itertools.islice(itertools.cycle(xs), 5))
    for i in itertools.count():
        if i >= len(xs):
            break
        total = total + xs[i] * i
    return total, pairs, combos, torch.stack(head), list(itertools.zip_longest(range(2), xs[:1]))
