"""User objects: classes with methods/properties/classmethods/staticmethods, inheritance
and super(), dataclasses (plain and frozen), enums, dunder protocols, getattr/setattr/
hasattr, isinstance/issubclass/type checks, and nn.Module instances (submodules,
ModuleList, ModuleDict, Sequential, buffers, hooks, train/eval)."""
import copy
import dataclasses
import enum

import torch
from torch import nn

from .registry import args, flip, pick, program, randint, randn, seeded, tensors


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, t):
        return t * self.k

    def __call__(self, t):
        return self.apply(t) + 1


@program(lambda s: args(randn(3), pick(s, [2.0, 3.0])))
def class_instance_methods(x, k):
    s = Scaler(k)
    return s.apply(x), s(x), s.k


class Accumulator:
    def __init__(self, count=0):
        self.count = count
        self.total = None

    def update(self, t):
        self.count += 1
        self.total = t if self.total is None else self.total + t
        return self


@program(lambda s: args(randn(3), Accumulator(count=s)))
def mutate_input_object(x, acc):
    acc.update(x).update(x * 2)
    return acc.count


class Box:
    def __init__(self, t):
        self._t = t
        self.reads = 0

    @property
    def value(self):
        self.reads += 1
        return self._t * 2

    @value.setter
    def value(self, v):
        self._t = v / 2

    @property
    def shape(self):
        return self._t.shape


@program(tensors((3,), (3,)))
def properties(x, y):
    b = Box(x)
    a = b.value
    b.value = y
    return a, b.value, b.shape, b.reads


class Factory:
    default = 3.0

    def __init__(self, t, k):
        self.t, self.k = t, k

    @classmethod
    def create(cls, t):
        return cls(t, cls.default)

    @staticmethod
    def combine(a, b):
        return a * 2 + b

    def result(self):
        return self.combine(self.t, self.k)


class SubFactory(Factory):
    default = 5.0


@program(tensors((3,)))
def classmethod_staticmethod(x):
    a = Factory.create(x)
    b = SubFactory.create(x)
    return a.result(), b.result(), type(b).__name__, Factory.combine(x, x), b.k


class Base:
    def __init__(self, k):
        self.k = k

    def forward(self, t):
        return t * self.k

    def describe(self):
        return f"{type(self).__name__}(k={self.k})"


class Child(Base):
    def __init__(self, k, b):
        super().__init__(k)
        self.b = b

    def forward(self, t):
        return super().forward(t) + self.b


class GrandChild(Child):
    def forward(self, t):
        return super().forward(t).relu()


@program(lambda s: args(randn(4), pick(s, [1.0, -2.0])))
def inheritance_super(x, k):
    objs = [Base(k), Child(k, 1.0), GrandChild(k, -0.5)]
    return [o.forward(x) for o in objs], [o.describe() for o in objs], GrandChild.__mro__[1] is Child


class DA:
    def tag(self):
        return ["A"]


class DB(DA):
    def tag(self):
        return ["B"] + super().tag()


class DC(DA):
    def tag(self):
        return ["C"] + super().tag()


class DD(DB, DC):
    def tag(self):
        return ["D"] + super().tag()


@program(tensors((3,)))
def diamond_mro(x):
    tags = DD().tag()
    return x * len(tags), tags, [c.__name__ for c in DD.__mro__]


@program(lambda s: args(pick(s, [randn(3), 2.0, 3, randn(3).double(), [1.0, 2.0], True])))
def isinstance_dispatch(v):
    if isinstance(v, torch.Tensor):
        return v * 2, "tensor", v.dtype
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return torch.full((2,), float(v)), type(v).__name__, isinstance(v, int)
    return torch.tensor(v), "other", None


@program(tensors((3,)))
def type_checks(x):
    c = GrandChild(1.0, 2.0)
    return (issubclass(GrandChild, Base), issubclass(Base, Child), type(c) is GrandChild,
            type(c) == Child, isinstance(c, Base), isinstance(x, torch.Tensor),
            type(x) is torch.Tensor, isinstance(x, nn.Parameter), x * 1, callable(c.forward),
            callable(x), issubclass(bool, int))


class Bag:
    pass


@program(lambda s: args(randn(3), pick(s, ["alpha", "beta"])))
def dynamic_attributes(x, name):
    b = Bag()
    setattr(b, name, x * 2)
    b.other = 1
    has = hasattr(b, name), hasattr(b, "missing")
    v = getattr(b, name)
    d = getattr(b, "missing", None)
    delattr(b, "other")
    return v, has, d, sorted(vars(b)), hasattr(b, "other")


def _bag_input(s):
    b = Bag()
    if s % 2 == 0:
        b.a = randn(3)
    if s % 3 == 0:
        b.calls = s
    return args(b, randn(3))


@program(_bag_input)
def setattr_on_input_object(obj, x):
    for name in ("a", "b"):
        if hasattr(obj, name):
            setattr(obj, name, getattr(obj, name) + x)
        else:
            setattr(obj, name, x.clone())
    obj.calls = getattr(obj, "calls", 0) + 1
    return obj.a * obj.b


@dataclasses.dataclass
class PairDC:
    a: torch.Tensor
    b: torch.Tensor
    scale: float = 1.0

    def combined(self):
        return (self.a + self.b) * self.scale


@program(lambda s: args(randn(3), randn(3), pick(s, [1.0, 0.5])))
def dataclass_plain(x, y, scale):
    p = PairDC(x, y)
    q = PairDC(x * 2, y, scale=scale)
    q.scale += 1
    return p.combined(), q, [f.name for f in dataclasses.fields(q)], dataclasses.is_dataclass(q)


@dataclasses.dataclass
class Config:
    hidden: int
    scale: float
    history: list = dataclasses.field(default_factory=list)


@program(lambda s: args(randn(3), Config(hidden=pick(s, [2, 3]), scale=pick(s, [0.5, 2.0]))))
def dataclass_input_mutation(x, cfg):
    cfg.history.append(cfg.hidden)
    cfg.hidden += 1
    return x.repeat(cfg.hidden) * cfg.scale


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: torch.Tensor
    k: int = 2

    def apply(self, t):
        return t * self.w + self.k


@program(tensors((3,), (3,)))
def frozen_dataclass(x, w):
    f = Frozen(w)
    try:
        f.k = 5
        err = None
    except dataclasses.FrozenInstanceError as e:
        err = str(e)
    g = dataclasses.replace(f, k=7)
    return f.apply(x), g.apply(x), err, g.k, f.k


@dataclasses.dataclass
class Normalizer:
    x: torch.Tensor
    eps: float = 1e-5
    mean: torch.Tensor = dataclasses.field(init=False)
    tags: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.mean = self.x.mean()
        self.tags.append("init")


@program(tensors((4,)))
def dataclass_post_init(x):
    n = Normalizer(x)
    return n.x - n.mean, n.tags, n, [f.name for f in dataclasses.fields(n)]


@dataclasses.dataclass(order=True, frozen=True)
class Version:
    major: int
    minor: int


@program(lambda s: args(randn(2), pick(s, [(1, 2), (2, 0), (1, 9)])))
def dataclass_compare_hash(x, ver):
    v = Version(*ver)
    ref = Version(1, 5)
    table = {ref: "ref", v: "v"}
    return (x * (2 if v > ref else 1), v == Version(*ver), len(table), v < ref,
            hash(v) == hash(Version(*ver)), v)


class Mode(enum.Enum):
    ADD = "add"
    MUL = "mul"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


@program(lambda s: args(randn(3), pick(s, [Mode.ADD, Mode.MUL]),
                        pick(s, [Level.LOW, Level.HIGH, Level.HIGH])))
def enum_dispatch(x, mode, level):
    y = x + level if mode is Mode.ADD else x * level
    return y, mode.value, level.name, Mode("mul") is Mode.MUL, int(level) * 2, mode


class TensorBag:
    def __init__(self, items):
        self.items = list(items)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def __iter__(self):
        return iter(self.items)

    def __contains__(self, key):
        return isinstance(key, int) and 0 <= key < len(self.items)


@program(lambda s: args([randn(2) for _ in range(pick(s, [2, 3, 4]))]))
def container_protocol(xs):
    bag = TensorBag(xs)
    return len(bag), bag[0] * 2, [t.sum() for t in bag], 1 in bag, 99 in bag, bag[-1]


class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, o):
        return Vec(self.t + (o.t if isinstance(o, Vec) else o))

    def __radd__(self, o):
        return self.__add__(o)

    def __mul__(self, k):
        return Vec(self.t * k)

    def __neg__(self):
        return Vec(-self.t)

    def __eq__(self, o):
        return isinstance(o, Vec) and bool((self.t == o.t).all())

    def __repr__(self):
        return f"Vec(n={self.t.numel()})"


@program(tensors((3,), (3,)))
def operator_overloading(x, y):
    a = Vec(x)
    b = Vec(y)
    c = a + b * 2
    d = -c + 1.0
    e = sum([a, b], Vec(torch.zeros(3)))
    return c, d.t, e, a == Vec(x.clone()), repr(c), str(d), 2.0 + a


class Registry:
    count = 0
    names = []

    def __init__(self, name):
        Registry.count += 1
        type(self).names.append(name)
        self.name = name


def _reset_registry(step):
    Registry.count = step % 2
    Registry.names = ["seed"] * (step % 2)


def _registry_state():
    return Registry.count, Registry.names


@program(lambda s: args(randn(3), pick(s, ["a", "bb"])), reset=_reset_registry,
         state=_registry_state)
def class_attribute_mutation(x, tag):
    Registry(tag)
    r2 = Registry(tag + "2")
    return x * Registry.count, r2.name, len(Registry.names)


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b

    def total(self):
        return self.a + self.b


@program(tensors((3,), (3,)))
def slots_class(x, y):
    s = Slotted(x, y)
    s.a = s.a * 2
    try:
        s.c = 1
        err = None
    except AttributeError as e:
        err = type(e).__name__
    return s.total(), err, hasattr(s, "b")


@program(lambda s: args(randn(3), pick(s, [2, 3])))
def local_class_definition(x, k):
    class Local:
        factor = k

        def go(self, t):
            return t * self.factor

    return Local().go(x), Local.__name__


class Pipeline:
    def __init__(self):
        self.ops = []

    def add(self, k):
        self.ops.append(("add", k))
        return self

    def mul(self, k):
        self.ops.append(("mul", k))
        return self

    def run(self, t):
        for op, k in self.ops:
            t = t + k if op == "add" else t * k
        return t


@program(lambda s: args(randn(3), pick(s, [2.0, -1.0, 0.5])))
def method_chaining(x, k):
    p = Pipeline().add(1).mul(k).add(-k)
    return p.run(x), p.ops


class Shape:
    def area(self):
        raise NotImplementedError("subclass must implement area")


class Square(Shape):
    def __init__(self, s):
        self.s = s

    def area(self):
        return self.s * self.s


@program(lambda s: args(randn(3), not flip(s)))
def abstract_method_error(x, use_base):
    obj = Shape() if use_base else Square(x)
    try:
        return obj.area(), "ok"
    except NotImplementedError as e:
        return x, str(e)


class Tagged:
    def __init__(self, name, n):
        self.name = name
        self.n = n

    def __repr__(self):
        return f"Tagged({self.name!r}, {self.n})"

    def __str__(self):
        return f"<{self.name}:{self.n}>"

    def __format__(self, spec):
        return f"[{self.name:{spec}}]" if spec else str(self)


@program(lambda s: args(randn(3), s))
def object_string_conversions(x, n):
    t = Tagged("obj", n)
    s = f"{t} {t!r} {t:>6}"
    return x * len(s), s, repr([t]), str(t)


class Key:
    def __init__(self, a, b):
        self.a = a
        self.b = b

    def __eq__(self, o):
        return isinstance(o, Key) and (self.a, self.b) == (o.a, o.b)

    def __hash__(self):
        return hash((self.a, self.b))


@program(lambda s: args(randn(3), pick(s, [1, 4])))
def custom_hash_keys(x, a):
    table = {Key(1, 2): x, Key(a, 2): x * 2}
    hit = table.get(Key(1, 2))
    return len(table), hit, Key(a, 2) in table, table[Key(a, 2)]


# ---- nn.Module -------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, d_in=5, d_h=8, d_out=3):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_h)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(d_h, d_out)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


MLP_MODEL = seeded(0, MLP)


@program(lambda s: args(randn(pick(s, [4, 4, 2, 7]), 5)))
def module_mlp(x):
    return MLP_MODEL(x)


@program(tensors((3, 5)))
def module_no_grad_inference(x):
    with torch.no_grad():
        y = MLP_MODEL(x)
    return y, y.requires_grad


@program(tensors((2,)))
def module_parameter_iteration(x):
    total = sum(p.abs().sum() for p in MLP_MODEL.parameters())
    names = [n for n, _ in MLP_MODEL.named_parameters()]
    shapes = {n: tuple(p.shape) for n, p in MLP_MODEL.named_parameters()}
    return x * total, names, shapes, [type(m).__name__ for m in MLP_MODEL.children()]


class Stack(nn.Module):
    def __init__(self, n=3, d=4):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(n))

    def forward(self, x):
        for i, (layer, norm) in enumerate(zip(self.layers, self.norms)):
            x = x + norm(layer(x)) * (i + 1)
        return x, len(self.layers)


STACK = seeded(1, Stack)


@program(tensors((2, 4)))
def module_list(x):
    return STACK(x)


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({
            "cls": nn.Linear(4, 2),
            "reg": nn.Linear(4, 1),
            "emb": nn.Sequential(nn.Linear(4, 3), nn.Tanh()),
        })

    def forward(self, x, which):
        return {k: self.heads[k](x) for k in which if k in self.heads}, list(self.heads.keys())


HEADS = seeded(2, Heads)


@program(lambda s: args(randn(3, 4), pick(s, [["cls"], ["reg", "emb"], ["cls", "zzz", "emb"]])))
def module_dict(x, which):
    return HEADS(x, which)


SEQ = seeded(3, lambda: nn.Sequential(nn.Linear(5, 6), nn.GELU(), nn.Dropout(0.0),
                                      nn.Linear(6, 2), nn.Softmax(dim=-1)))


@program(tensors((3, 5)))
def module_sequential(x):
    out = SEQ(x)
    first = SEQ[0](x)
    return out, first, len(SEQ), SEQ[1:](first)


@program(tensors((3, 5)))
def module_children_loop(x):
    for m in SEQ:
        if isinstance(m, nn.Linear):
            x = m(x) * 0.5
        elif isinstance(m, nn.Dropout):
            continue
        else:
            x = m(x)
    return x


class WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0]))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.weight = nn.Parameter(torch.ones(3))

    def forward(self, x):
        self.calls += 1
        return x * self.scale * self.weight + self.calls


BUF = seeded(4, WithBuffers)
_BUF_INIT = copy.deepcopy(BUF.state_dict())


def _reset_buf(step):
    BUF.load_state_dict(_BUF_INIT)
    with torch.no_grad():
        BUF.calls.fill_(step)


@program(tensors((2, 3)), reset=_reset_buf, state=lambda: BUF.state_dict())
def module_buffers(x):
    return BUF(x), [n for n, _ in BUF.named_buffers()]


BN = seeded(5, lambda: nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)))
_BN_INIT = copy.deepcopy(BN.state_dict())


def _reset_bn(step):
    BN.load_state_dict(_BN_INIT)
    BN.train()


@program(tensors((6, 4)), reset=_reset_bn,
         state=lambda: (BN.state_dict(), [m.training for m in BN.modules()]))
def module_batchnorm_train(x):
    return BN(x)


@program(lambda s: args(nn.Linear(3, pick(s, [2, 4])), randn(5, 3)))
def module_as_argument(m, x):
    y = m(x)
    return y, m.out_features, m.weight.shape, m.training, isinstance(m, nn.Linear)


DROP = seeded(6, lambda: nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)))


def _reset_drop(step):
    DROP.train()


@program(tensors((3, 4)), reset=_reset_drop,
         state=lambda: [m.training for m in DROP.modules()])
def module_eval_mode(x):
    DROP.eval()
    y = DROP(x)
    flags = [m.training for m in DROP.modules()]
    DROP.train()
    return y, flags, DROP.training


HOOKED = seeded(7, lambda: nn.Linear(3, 3))
HOOKED.register_forward_hook(lambda mod, inp, out: out * 2)
HOOKED.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))


@program(tensors((2, 3)))
def module_with_hooks(x):
    return HOOKED(x)


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.alpha = nn.Parameter(torch.tensor(0.5))
        self.mode = "sigmoid"

    def forward(self, x):
        g = torch.sigmoid(self.proj(x)) if self.mode == "sigmoid" else torch.tanh(self.proj(x))
        if self.training:
            g = g * self.alpha
        return x * g


GATE = seeded(8, Gate)


def _reset_gate(step):
    GATE.mode = "sigmoid"
    GATE.train(step % 3 != 2)


@program(lambda s: args(randn(2, 4), pick(s, ["sigmoid", "tanh", "tanh"])), reset=_reset_gate,
         state=lambda: (GATE.mode, GATE.training))
def module_attribute_switch(x, mode):
    GATE.mode = mode
    return GATE(x)


class BaseBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class ResBlock(BaseBlock):
    def forward(self, x):
        return x + super().forward(x).relu()


RES = seeded(9, ResBlock)


@program(tensors((3, 4)))
def module_inheritance_super(x):
    return RES(x), isinstance(RES, BaseBlock), type(RES).__mro__[1].__name__


EMB = seeded(10, lambda: nn.Embedding(10, 3))


@program(lambda s: args(randint(0, 10, (pick(s, [4, 6]),))))
def module_embedding(idx):
    return EMB(idx), EMB.weight[idx].sum(), EMB.num_embeddings


@program(tensors((3, 4)))
def module_constructed_inside(x):
    lin = nn.Linear(4, 2)
    with torch.no_grad():
        lin.weight.fill_(0.5)
        lin.bias.zero_()
    return lin(x), lin.weight.requires_grad


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(2 * 2 * 2, 3)

    def forward(self, x):
        h = self.pool(torch.relu(self.conv(x)))
        return self.head(h.flatten(1))


CNN = seeded(11, TinyCNN)


@program(lambda s: args(randn(pick(s, [1, 2, 3]), 1, 4, 4)))
def module_cnn(x):
    return CNN(x)
