"""collections.OrderedDict, defaultdict and namedtuple built inside a compiled function."""
import collections

import torch

import ember
from capture_helpers import BACKENDS, assert_matches_eager, run_both


def _ordered(x):
    od = collections.OrderedDict()
    od["b"] = x
    od["a"] = x * 2
    od.move_to_end("b")
    first = od.popitem(last=False)
    od.update(c=x + 1)
    copy = collections.OrderedDict([("k", 1)], extra=2)
    return od["b"] + od["c"], list(od), first[0], isinstance(od, collections.OrderedDict), list(copy.items())


def test_ordered_dict_in_a_graph():
    assert_matches_eager(_ordered, torch.randn(3), graphs=1)


def _default(x):
    groups = collections.defaultdict(list)
    for index, row in enumerate(x):
        groups[index % 2].append(row)
    counts = collections.defaultdict(int, {"seed": 5})
    counts["n"] += 3
    lazy = collections.defaultdict(lambda: x.sum())
    return (torch.stack(groups[0]), len(groups), dict(counts), lazy["missing"], groups.default_factory is list,
            "other" in groups)


def test_defaultdict_in_a_graph():
    assert_matches_eager(_default, torch.randn(4, 3), graphs=1)


def _namedtuples(x):
    Point = collections.namedtuple("Point", ["u", "v"], defaults=[10])
    p = Point(x, 2)
    q = Point(u=x * 2)
    return p.u * p.v + q.u * q.v, p._fields, type(q).__name__, len(q)


def test_namedtuple_class_made_in_the_frame():
    assert_matches_eager(_namedtuples, torch.randn(3), graphs=1)


def _returns_namedtuple_and_dicts(x):
    Pair = collections.namedtuple("Pair", "first second")
    od = collections.OrderedDict(z=x + 1, y=x - 1)
    dd = collections.defaultdict(list)
    dd["k"].append(x * 3)
    print("a graph break keeps all three alive")
    return Pair(x, od), dd


def test_they_are_rebuilt_after_a_graph_break():
    for backend in BACKENDS:
        expected, got = run_both(_returns_namedtuple_and_dicts, torch.randn(3), backend=backend)
        (pair, dd), (eager_pair, eager_dd) = got, expected
        assert type(pair).__name__ == "Pair" and pair._fields == ("first", "second")
        assert type(pair).__module__ == type(eager_pair).__module__ == __name__
        torch.testing.assert_close(pair.first, eager_pair.first)
        assert type(pair.second) is collections.OrderedDict and list(pair.second) == ["z", "y"]
        torch.testing.assert_close(pair.second["y"], eager_pair.second["y"])
        assert type(dd) is collections.defaultdict and dd.default_factory is list
        torch.testing.assert_close(dd["k"][0], eager_dd["k"][0])
    # As in eager, each call makes a new class.
    ember.reset()
    compiled = ember.compile(_returns_namedtuple_and_dicts, backend="eager")
    first, second = compiled(torch.randn(3))[0], compiled(torch.randn(3))[0]
    assert type(first) is not type(second)
    explanation = ember.explain(_returns_namedtuple_and_dicts)(torch.randn(3))
    assert explanation.graph_break_count == 1 and not explanation.frames_run_eagerly


def test_fields_of_torch_return_types_stay_in_the_graph():
    """x.max(-1).indices, torch.sort(...).values: struct sequences have no _fields; their
    attributes broke the graph (fuzz default 28982)."""
    def fn(x):
        m, s, t = x.max(-1), torch.sort(x, 1), torch.topk(x, 2)
        return m.values + 1, m.indices, s.values * 2, s.indices, t.indices, t.values, x.min(0).indices

    x = torch.randn(4, 5)
    for ours, theirs in zip(ember.compile(fn, fullgraph=True)(x), fn(x)):
        assert torch.equal(ours, theirs)


def _fromkeys(x, y):
    plain = dict.fromkeys(["a", "b"])
    scaled = dict.fromkeys(plain, x + 1)
    default = collections.defaultdict.fromkeys(iter(scaled), x - 2)
    ordered = collections.OrderedDict.fromkeys(("a", "b"), value=y)
    letters = collections.defaultdict.fromkeys("ab", "z")
    return (plain, scaled, dict(default), type(default).__name__, default.default_factory, ordered,
            type(ordered).__name__, dict(letters))


def test_fromkeys_of_dict_ordered_dict_and_defaultdict():
    assert_matches_eager(_fromkeys, torch.randn(3), torch.randn(3), graphs=1)


def _deques(a, b):
    d = collections.deque([a, b])
    d.append(a + 1)
    d.extend([a, b])
    d.insert(0, "foo")
    tmp = d.pop()
    other = collections.deque([tmp])
    d.extendleft(other)
    other.clear()
    d[2] = "set"
    d = d.copy()
    d.append(d.popleft())
    d.rotate(2)
    bounded = collections.deque(range(5), maxlen=3)
    bounded.append(7)
    bounded.appendleft(-1)
    return list(d), len(d), d[0], list(bounded), bounded.maxlen, 7 in bounded, isinstance(d, collections.deque)


def test_deque_made_in_the_frame():
    assert_matches_eager(_deques, torch.randn(3), torch.randn(3), graphs=1)


def _returned_deque(x):
    d = collections.deque([x + 1], maxlen=2)
    d.appendleft(x * 2)
    return d


def test_a_deque_made_in_the_frame_is_returned_as_a_deque():
    for backend in BACKENDS:
        expected, got = run_both(_returned_deque, torch.ones(2), backend=backend)
        assert type(got) is collections.deque and got.maxlen == 2
        assert all(torch.equal(left, right) for left, right in zip(expected, got))


def _deque_errors(x):
    d = collections.deque()
    try:
        d.pop()
    except IndexError as error:
        message = str(error)
    return x + 1, message


def test_deque_errors_are_eagers():
    assert_matches_eager(_deque_errors, torch.randn(2), graphs=1)


class _Record(collections.OrderedDict):
    pass


class _Bag(dict):
    pass


class _Custom(dict):
    def __getitem__(self, key):
        return 0


def _dict_subclasses(x):
    record = _Record(sample=x + 1, other=x * 2)
    record["late"] = x - 1
    bag = _Bag([("a", x)], b=2)
    plain_copy = bag.copy()  # dict.copy() of a subclass is a dict
    record_copy = record.copy()  # OrderedDict.copy() keeps the subclass
    return (record, bag, type(plain_copy).__name__, type(record_copy).__name__,
            isinstance(record, collections.OrderedDict), list(record), bag["a"] * bag["b"])


def test_dict_subclass_that_adds_nothing_is_built_in_the_graph():
    assert_matches_eager(_dict_subclasses, torch.randn(3), graphs=1)
    expected, got = run_both(_dict_subclasses, torch.randn(3))
    assert type(got[0]) is _Record and type(got[1]) is _Bag


def _custom_dict(x):
    d = _Custom(a=x)
    return d["a"]


def test_dict_subclass_with_its_own_methods_still_breaks():
    expected, got = run_both(_custom_dict, torch.randn(3))
    assert expected == got == 0
