"""Python semantics while capturing: dict views, sets, mappings and identity-keyed containers
behave as in plain Python (each case once gave a wrong answer or a graph break)."""
import collections
import collections.abc

import pytest
import torch

import ember

from capture_helpers import assert_matches_eager


def _dict_views(x):
    d = {"a": 1, "b": 2}
    other = {"b": 3, "a": 4}
    return (
        x + 1,
        d.keys() == other.keys(),
        d.keys() == {"a", "b"},
        {"b", "a"} == d.keys(),
        d.keys() != {"a"},
        d.keys() == ["a", "b"],
        d.items() == {("a", 1), ("b", 2)},
        d.items() == other.items(),
        sorted(d.keys() & {"a", "z"}),
        sorted(d.keys() - {"a"}),
        sorted(d.keys() | {"c"}),
        sorted(d.keys() ^ {"b", "c"}),
        sorted({"a", "q"} & d.keys()),
        sorted(d.keys() & ["b", "x"]),
        "a" in d.keys(),
        "z" in d.keys(),
        ("a", 1) in d.items(),
        ("a", 2) in d.items(),
        2 in d.values(),
        d.keys() <= {"a", "b", "c"},
        d.keys().isdisjoint({"x"}),
        len(d.items()),
    )


def test_dict_views_compare_and_combine_like_sets():
    assert_matches_eager(_dict_views, torch.randn(3), graphs=1)


def _dict_equality(x):
    left = {"a": 1, "b": 2}
    ordered = collections.OrderedDict([("b", 2), ("a", 1)])
    reordered = collections.OrderedDict([("a", 1), ("b", 2)])
    return (x * 2, left == {"b": 2, "a": 1}, left == {"a": 1}, left != {"a": 1, "b": 3},
            ordered == left, ordered == reordered, {1, 2} == frozenset([2, 1]), {1} == [1])


def test_dict_and_set_equality():
    assert_matches_eager(_dict_equality, torch.randn(3), graphs=1)


@pytest.mark.parametrize("method, args", [("update", ([3],)), ("remove", (1,)), ("discard", (1,)),
                                          ("add", (3,)), ("clear", ()), ("pop", ())])
def test_frozenset_has_no_mutating_methods(method, args):
    def f(x):
        s = frozenset([1, 2])
        try:
            getattr(s, method)(*args)
            outcome = 1
        except AttributeError as error:
            outcome = 2 if "frozenset" in str(error) else 3
        return x + outcome, len(s)

    assert_matches_eager(f, torch.randn(3))


def _set_algebra(x):
    s = {1, 2, 3}
    alias = s
    s |= {4}
    s -= {1}
    frozen = frozenset([1, 2])
    merged = frozen | {5}
    also = {5} | frozen
    s.intersection_update([2, 3, 4, 9])
    return (x - 1, sorted(alias), type(merged).__name__, type(also).__name__, sorted(merged),
            {1, 2} < {1, 2, 3}, {1, 2}.issubset([1, 2, 7]), sorted({1, 2}.symmetric_difference([2, 3])))


def test_set_operators_keep_python_types_and_aliases():
    assert_matches_eager(_set_algebra, torch.randn(3), graphs=1)


class Scaled(collections.abc.Mapping):
    """A read-only mapping whose items are computed: dict() must go through keys() and []."""

    def __init__(self, base):
        self.base = base

    def __getitem__(self, key):
        return self.base[key] * 10

    def __iter__(self):
        return iter(self.base)

    def __len__(self):
        return len(self.base)


class Explicit:
    """Not a Mapping subclass, but it has keys() and []: dict() uses them too."""

    def keys(self):
        return ["p", "q"]

    def __getitem__(self, key):
        return key * 2


def _from_mappings(x, mapping, explicit):
    d = dict(mapping)
    e = {"z": 0}
    e.update(mapping)
    f = dict(explicit, extra=1)
    g = {**mapping}
    return x + d["a"], d, e, f, g, dict([("k", 1), ("j", 2)])


def test_dict_of_a_user_mapping_reads_keys_and_getitem():
    assert_matches_eager(_from_mappings, torch.randn(3), Scaled({"a": 1, "b": 2}), Explicit(), graphs=1)


def _tensor_keys(x, y):
    z = x * 2
    table = {x: "x", z: "z"}
    table[y] = "y"
    members = {x, z}
    members.add(x)
    counts = collections.defaultdict(int)
    for t in (x, y, x):
        counts[t] += 1
    picked = [t for t in (x, y, z) if t in members]
    return (table[x], table[z], table[y], len(table), len(members), y in members, z in members,
            counts[x], counts[y], torch.stack(picked).sum(), sum(k * len(v) for k, v in table.items()))


def test_tensors_as_dict_keys_and_set_members_by_identity():
    assert_matches_eager(_tensor_keys, torch.randn(3), torch.randn(3), graphs=1)


def _tensor_keys_across_a_break(x):
    table = {x: x + 1}
    print("a graph break")
    return table[x] * 2, list(table)[0] is x


def test_tensor_keyed_dict_survives_a_graph_break():
    assert_matches_eager(_tensor_keys_across_a_break, torch.randn(3), graphs=2, breaks=1)


def _lookup(table, members, probe):
    return probe * 2, probe in table, probe in members, table.get(probe, "absent")


def test_identity_lookups_in_input_containers_are_guarded():
    import ember

    ember.reset()
    compiled = ember.compile(_lookup, backend="eager")
    a, b = torch.randn(2), torch.randn(2)
    with ember.config.patch(raise_capture_errors=True):
        for table, members, probe in [({a: "a"}, {a}, b), ({a: "a"}, {a}, a), ({b: "b"}, {a, b}, b)]:
            expected, got = _lookup(table, members, probe), compiled(table, members, probe)
            torch.testing.assert_close(got[0], expected[0])
            assert got[1:] == expected[1:]


def test_jiterator_kernels_break_the_graph_and_run_eagerly(caplog):
    """A jiterator function compiles and launches its CUDA kernel outside the dispatcher: captured,
    it would run on fake tensors and hand their null pointers to the GPU.  It breaks the graph
    and runs on the real tensors (without a GPU: with eager's own error)."""
    import pytest

    import ember

    square_plus = torch.cuda.jiterator._create_jit_fn("template <typename T> T f(T x) { return x * x + x; }")

    def fn(x):
        return square_plus(x.sin()) * 2

    graphs = []

    def spy(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x = torch.randn(8, device="cuda" if torch.cuda.is_available() else "cpu")
    ember.reset()
    compiled = ember.compile(fn, backend=spy)
    with caplog.at_level("DEBUG", logger="ember.graph_breaks"):
        if torch.cuda.is_available():
            torch.testing.assert_close(compiled(x), fn(x))
        else:
            with pytest.raises(AssertionError, match="only supported on CUDA"):
                compiled(x)
    messages = "\n".join(r.getMessage() for r in caplog.records if r.name == "ember.graph_breaks")
    assert "torch.cuda.jiterator" in messages and "not captured" in messages, messages  # not run on fakes
    # the graph before the break holds the sin; the jiterator call ran in Python
    assert [n.target for n in graphs[0].graph.nodes if n.op == "call_method"] == ["sin"]
    assert not any("jit" in str(n.target).lower() for g in graphs for n in g.graph.nodes)


def test_a_mutating_aten_overload_whose_result_is_unused_still_writes():
    """torch.ops.aten.add_.Tensor(a, b) with its result dropped (compiled autograd's graphs add
    into `.grad` this way): the write is a side effect, not dead code."""
    def f(a, b):
        torch.ops.aten.add_.Tensor(a, b * 2)
        return ()

    for backend in ("eager", "aot_eager", "ember"):
        a, b = torch.zeros(3), torch.ones(3)
        ember.compile(f, backend=backend)(a, b)
        assert torch.equal(a, torch.full((3,), 2.0)), backend


def test_torch_ops_is_not_taken_for_a_disabled_function():
    """torch.ops answers any attribute with a namespace, `_ember_disabled` included: only a
    True flag marks an ember.disable'd function."""
    getattr(torch.ops, "_ember_disabled", None)  # (what an earlier check leaves behind)

    def f(a):
        return (a + torch.ops.aten.zeros.default([2, 3], dtype=torch.float32, device="cpu"),)

    ember.reset()
    explained = ember.explain(f)(torch.ones(2, 3))
    assert explained.graph_break_count == 0, explained.break_reasons


def _inplace_functions_return_their_argument(x, out):
    y = torch.Tensor.add_(x, 1)
    z = torch.relu_(x)
    w = torch.sigmoid_(x)
    o = torch.add(x, 1, out=out)
    return (x * 2, y is x, z is x, w is x, o is out, {y: 1}.get(x, 0), x in {z}, x in {out})


def test_inplace_ops_called_as_functions_return_the_same_object():
    assert_matches_eager(_inplace_functions_return_their_argument, torch.randn(3), torch.empty(3),
                         graphs=1)


def _dict_update_from_iterables_of_pairs(x):
    d = {}
    d.update(zip(["a", "b"], [x, x + 1]))
    d.update([("c", x * 3)])
    d.update(map(lambda k: (k, k), "gh"), e=4)
    d.update((k, x + len(k)) for k in ("ij", "k"))
    return d


def test_dict_update_takes_zip_map_and_generators_of_pairs():
    assert_matches_eager(_dict_update_from_iterables_of_pairs, torch.randn(2), graphs=1, breaks=0)


def _hasattr_of_builtin_types(x):
    return x + 1, hasattr(tuple, "_fields"), hasattr(tuple, "count"), getattr(dict, "nothing", 3)


def test_hasattr_of_a_builtin_type_answers_false_for_a_missing_attribute():
    assert_matches_eager(_hasattr_of_builtin_types, torch.randn(2), graphs=1, breaks=0)


class _PlainObject:
    pass


def _text_of_new_object(x):
    a = _PlainObject()
    a.value = x + 1
    return x * 2, str(a), repr(a), a


def test_str_of_an_object_made_in_the_frame_is_its_address_made_by_the_glue():
    out = ember.compile(_text_of_new_object, backend="eager", fullgraph=True)(torch.ones(3))
    assert type(out[3]) is _PlainObject
    assert out[1] == object.__repr__(out[3]) == out[2]  # the object handed back, eager's text
    torch.testing.assert_close(out[0], torch.ones(3) * 2)
    torch.testing.assert_close(out[3].value, torch.ones(3) + 1)


def _looks_at_text(x):
    text = str(_PlainObject())
    return x + len(text.split(" object at")[0])


def test_reading_the_text_of_such_an_object_breaks():
    assert_matches_eager(_looks_at_text, torch.ones(3), breaks=None)


def _in_list_of_tensors(x, y):
    x.add_(1)
    found = 1 in [x]
    missing = 2.5 not in (y, x)
    mixed = 3 in [y, 3]
    x.add_(10)  # after the comparison: the answer is the one eager had
    return found, missing, mixed, x


def test_number_in_a_list_of_one_element_tensors_is_answered_after_the_graph():
    for start in (0.0, 1.5):
        x, y = torch.tensor([start]), torch.tensor(2.5)
        assert_matches_eager(_in_list_of_tensors, x, y, graphs=1)


def _branches_on_in(x):
    if 1 in [x]:
        return x + 1
    return x - 1


def test_branching_on_in_over_tensors_breaks_and_stays_correct():
    for value in (1.0, 2.0):
        assert_matches_eager(_branches_on_in, torch.tensor([value]), breaks=None)


def _adds_to_frozenset():
    s = frozenset((1, 2, 3))
    s.add({2})
    return len(s)


def _raises_after_work(x, log):
    log.append(x + 1)
    raise KeyError("boom")


def _zips_strictly(x, ys, zs):
    x = x.clone()
    for y, z in zip(ys, zs, strict=True):
        x += y * z
    return x


def test_fullgraph_lets_the_users_own_exception_propagate_as_eager():
    ember.reset()
    with pytest.raises(AttributeError, match="frozenset"):
        ember.compile(_adds_to_frozenset, backend="eager", fullgraph=True)()
    log = []
    with pytest.raises(KeyError, match="boom"):
        ember.compile(_raises_after_work, backend="eager", fullgraph=True)(torch.ones(2), log)
    torch.testing.assert_close(log[0], torch.ones(2) + 1)  # what ran before the raise, ran


def test_an_exception_raised_in_a_loop_runs_that_call_eagerly_only():
    ember.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = ember.compile(_zips_strictly, backend=backend, fullgraph=True)
    x, ys, zs = torch.ones(3), [1.0, 2.0, 3.0], [2.0, 5.0, 8.0]
    with pytest.raises(ValueError, match=r"zip\(\) argument 2 is longer"):
        compiled(x, ys[:1], zs)
    torch.testing.assert_close(compiled(x, ys, zs), _zips_strictly(x, ys, zs))
    assert len(graphs) == 1  # the valid call was still captured
