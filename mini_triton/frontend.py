"""The kernel language: what Triton's compiler accepts in a ``@jit`` function, and nothing more.

A ``@jit`` function is not Python. Triton's compiler reads its source and accepts a small language:
``tl`` operations, calls of other ``@jit`` functions, a few builtins (``range``, ``len``, ``min``,
``max``, ``int``, ``float``, ``list``, ``isinstance``, ``getattr``, ``hasattr``, ``print``), globals that
are ``tl.constexpr`` values, dtypes or modules (the language's, or a module of ``@jit`` helpers), and the
attributes of Triton's tensors and dtypes.
A Python function without ``@triton.jit``, torch, a plain global number, a ``break``, a ``lambda``:
none of them compiles on a GPU.

The simulator holds a kernel to the same language. Each ``@jit`` function is compiled once more
from its source (:func:`compile_kernel`), under its own file name and line numbers:

- its constructs are checked against the ones Triton's code generator has (``NOT_IN_KERNELS``);
- each name it reads from outside is bound as Triton binds it (:func:`bind`), or refused with the
  error Triton gives;
- every ``a.b`` becomes ``attribute(a, "b")``, which allows the names Triton's tensors, dtypes and
  modules have and nothing else (no ``.buf``, no ``.handle``, no ``__class__``).

So a kernel that runs here compiles on a GPU, and a kernel reaches nothing but the language: not
torch, not the host's Python, not the simulator's own state (its counts and checks).

About 560 lines in one module, in three sections: the constructs Triton's code generator has, the names a
kernel reads from outside and how Triton binds them, and the compiling of a ``@jit`` function (its attributes
included). They are one rule (what compiles), applied as the kernel's source is compiled.
"""
from __future__ import annotations

import ast
import builtins
import enum
import inspect
import math
import sys
import textwrap
import types

from . import boolops, runtime
from . import dtypes
from .blocks import constexpr, loop_index, tensor
from .errors import CompilationError

ATTRIBUTE = "_mini_triton_attribute"        # what the compiled source calls to read an attribute
LOOP_TYPES = "_mini_triton_loop_types"       # what it calls around a loop, to keep its carried variables' types
IF_TYPES = "_mini_triton_if_types"           # what it calls around an if, to keep the types its branches join

# Constructs Triton's code generator has no visitor for, with what to write instead.
NOT_IN_KERNELS = {
    ast.Break: ("`break`", "end the loop with its bound, or mask the iterations past the end"),
    ast.Continue: ("`continue`", "mask what the rest of the iteration does instead"),
    ast.Lambda: ("a `lambda`", "write a @triton.jit function"),
    ast.FunctionDef: ("a function defined inside a kernel", "define it at the top level, with @triton.jit"),
    ast.AsyncFunctionDef: ("an async function", ""), ast.ClassDef: ("a class", ""),
    ast.Dict: ("a dict", "use a tuple"), ast.Set: ("a set", "use a tuple"),
    ast.DictComp: ("a dict comprehension", ""), ast.SetComp: ("a set comprehension", ""),
    ast.GeneratorExp: ("a generator expression", ""),
    ast.Try: ("`try`", "a kernel cannot catch errors"),
    ast.Raise: ("`raise`", "use tl.device_assert or tl.static_assert"),
    ast.Delete: ("`del`", ""), ast.Global: ("`global`", ""), ast.Nonlocal: ("`nonlocal`", ""),
    ast.Import: ("an import", "import on the host, at the top of the file"), ast.ImportFrom: ("an import", ""),
    ast.With: ("`with`", ""), ast.AsyncWith: ("`async with`", ""), ast.AsyncFor: ("`async for`", ""),
    ast.Yield: ("`yield`", ""), ast.YieldFrom: ("`yield from`", ""), ast.Await: ("`await`", ""),
}
if sys.version_info >= (3, 10):
    NOT_IN_KERNELS[ast.Match] = ("`match`", "")
if sys.version_info >= (3, 11):
    NOT_IN_KERNELS[ast.TryStar] = ("`try`", "a kernel cannot catch errors")

# The attributes a kernel may read, by what it reads them of: Triton's own names.
TENSOR_API = frozenset({
    "T", "abs", "advance", "argmax", "argmin", "associative_scan", "atomic_add", "atomic_and", "atomic_cas",
    "atomic_load", "atomic_max", "atomic_min", "atomic_or", "atomic_poll", "atomic_store", "atomic_xchg",
    "atomic_xor", "broadcast_to", "cast", "cdiv", "ceil", "cos", "cumprod", "cumsum", "erf", "exp", "exp2",
    "expand_dims", "flip", "floor", "gather", "histogram", "item", "log", "log2", "logical_and", "logical_or",
    "max", "min", "permute", "ravel", "reduce", "reduce_or", "reshape", "rsqrt", "sigmoid", "sin", "softmax",
    "sort", "split", "sqrt", "sqrt_rn", "store", "sum", "to", "trans", "view", "xor_sum",
    "dtype", "shape", "numel", "type"})
DTYPE_API = frozenset({
    "FP_TYPES", "KIND", "OTHER_TYPES", "SIGNEDNESS", "SINT_TYPES", "STANDARD_FP_TYPES", "UINT_TYPES",
    "exponent_bias", "fp_mantissa_width", "get_int_max_value", "get_int_min_value", "is_bf16", "is_block",
    "is_bool", "is_const", "is_dtype", "is_floating", "is_fp16", "is_fp32", "is_fp64", "is_fp8", "is_fp8e4b15",
    "is_fp8e4b8", "is_fp8e4nv", "is_fp8e5", "is_fp8e5b16", "is_int", "is_int1", "is_int16", "is_int32",
    "is_int64", "is_int8", "is_int_signed", "is_int_unsigned", "is_ptr", "is_standard_floating", "is_uint16",
    "is_uint32", "is_uint64", "is_uint8", "is_void", "itemsize", "kind", "name", "primitive_bitwidth", "scalar",
    "element_ty", "address_space", "const", "int_bitwidth", "int_signedness"})
CONSTEXPR_API = frozenset({"value", "logical_and", "logical_or"})
DESCRIPTOR_API = frozenset({"load", "store", "shape", "strides", "block_shape", "dtype", "base"})
# Inside a kernel, ``triton`` is a module of a few pure functions and the language.
TRITON_IN_KERNELS = frozenset({"language", "cdiv", "next_power_of_2"})


ELEMENTWISE = {}          # "min"/"max" -> tl.minimum/tl.maximum: the language registers them (elementwise.py)


def _builtin_extreme(name, python):
    def extreme(*args, **kwargs):
        """Triton's ``min``/``max`` in a kernel: element-wise on blocks, Python's on plain values."""
        if len(args) > 1 and any(isinstance(a, tensor) for a in args):
            out = args[0]
            for a in args[1:]:
                out = ELEMENTWISE[name](out, a)
            return out
        return python(*args, **kwargs)
    extreme.__name__ = name
    return extreme


def _guarded_getattr(obj, name, *default):
    """``getattr`` in a kernel: the attributes :func:`attribute` allows."""
    return attribute(obj, name, *default)


def _guarded_hasattr(obj, name) -> bool:
    """``hasattr`` in a kernel: False for a name a kernel may not read."""
    if isinstance(obj, HelperModule):
        return isinstance(name, str) and not name.startswith("_") and hasattr(obj.module, name)
    if not isinstance(name, str) or name.startswith("_") or _allowed(obj, name) is False:
        return False
    return hasattr(obj, name)


# The builtins Triton's code generator knows (its builtin_namespace), and nothing else.
BUILTINS = {"range": range, "len": len, "int": int, "float": float, "list": list, "isinstance": isinstance,
            "print": print, "getattr": _guarded_getattr, "hasattr": _guarded_hasattr,
            "min": _builtin_extreme("min", min), "max": _builtin_extreme("max", max)}


def _allowed(obj, name):
    """True if a kernel may read ``obj.name``, False if not, None if ``obj`` is a module that answers itself."""
    if isinstance(obj, tensor):
        return name in TENSOR_API
    if isinstance(obj, dtypes.dtype):
        return name in DTYPE_API
    if isinstance(obj, constexpr):
        return name in CONSTEXPR_API
    if isinstance(obj, types.ModuleType):
        if obj is math:
            return True
        if obj.__name__ == "mini_triton":
            return name in TRITON_IN_KERNELS
        if obj.__name__.startswith("mini_triton.language"):
            return None
        return False
    if type(obj).__name__ == "TensorDescriptor" and type(obj).__module__ == "mini_triton.descriptors":
        return name in DESCRIPTOR_API
    if isinstance(obj, enum.EnumMeta) and obj.__module__.startswith("mini_triton.language"):
        return True                                    # tl.PropagateNan.ALL
    return False


def attribute(obj, name, *default):
    """``obj.name`` read in a kernel: Triton's names of tensors, dtypes, constexprs and the language's
    modules, nothing else. A module of the language answers for a name it lacks itself (names.py)."""
    if isinstance(obj, HelperModule):
        return obj.read(name, *default)
    if isinstance(obj, loop_index):
        obj = obj.block()                              # a loop's variable is a runtime scalar: i.to(tl.int64)
    allowed = _allowed(obj, name) if not name.startswith("_") else False
    if allowed is None:                                # tl, tl.math, libdevice, tl.extra: their own __all__
        if name in getattr(obj, "__all__", ()):
            return getattr(obj, name)
        missing = getattr(obj, "__getattr__", None)
        if missing is not None and not name.startswith("_"):
            return missing(name)                       # raises: "Triton has no ..." or "not simulated"
        allowed = False
    if allowed is False:
        if default:
            return default[0]
        raise CompilationError(f"{runtime.location()}: a kernel cannot read `.{name}` of {_what(obj)}: "
                               f"{_why(obj, name)}")
    return getattr(obj, name, *default)


def _what(obj) -> str:
    if isinstance(obj, tensor):
        return "a block"
    if isinstance(obj, types.ModuleType):
        return f"the module {obj.__name__.replace('mini_triton', 'triton')}"
    if isinstance(obj, (int, float, bool, str, tuple, list)):
        return f"a Python {type(obj).__name__}"
    return f"a {type(obj).__name__}"


def _why(obj, name) -> str:
    if name.startswith("_"):
        return "Triton's compiler reaches no private or special attribute (names that start with _)"
    if isinstance(obj, tensor):
        return "Triton's tensors have no such attribute (see the tl.tensor methods in Triton's documentation)"
    if isinstance(obj, types.ModuleType) and obj.__name__ == "mini_triton":
        return f"inside a kernel, triton offers only {', '.join(sorted(TRITON_IN_KERNELS))}"
    return "a kernel reads attributes of blocks, dtypes, constexprs and triton.language only"


# ---------------------------------------------------------------------------------------------------------
# binding the names a kernel reads from outside
# ---------------------------------------------------------------------------------------------------------
def _language_module(value) -> bool:
    return isinstance(value, types.ModuleType) and (value is math or value.__name__ == "mini_triton"
                                                    or value.__name__.startswith("mini_triton.language"))


# Modules of the host's libraries: a kernel that names one is refused with what it can use instead (Triton's compiler
# would read their attributes, and fail on the first one it cannot compile: torch.float32 is not a Triton dtype).
HOST_LIBRARIES = ("torch", "numpy", "os", "sys", "builtins")


class HelperModule:
    """A module of the kernel file's own helpers, read as a global (``from lib import helpers as tle``, then
    ``tle.program_id(0)`` where that is a ``@triton.jit`` function): Triton's compiler reads a module's attributes
    as they are, so each is bound when the kernel first reads it, as :func:`bind` binds a global (a @jit function,
    a constexpr, a dtype, a module), and a plain number is a constant."""

    def __init__(self, module: types.ModuleType, where: str, kernels: tuple):
        self.module, self.where, self.kernels, self.bound = module, where, kernels, {}

    def read(self, name: str, *default):
        if name not in self.bound:
            if name.startswith("_") or not hasattr(self.module, name):
                if default:
                    return default[0]
                raise CompilationError(f"{runtime.location()}: the module {self.module.__name__} has no attribute "
                                       f"`{name}` a kernel can read")
            value = getattr(self.module, name)
            constant = isinstance(value, (bool, int, float, str, type(None)))
            self.bound[name] = value if constant else bind(self.where, f"{self.module.__name__}.{name}", value,
                                                           self.kernels)
        return self.bound[name]


def bind(where: str, name: str, value, kernels: tuple):
    """What the global (or closure) ``name`` of a kernel is bound to, as Triton's compiler binds it:
    another @jit function, a tl.constexpr, a dtype, the language (tl, triton, libdevice, math) or one
    of its functions, a module of @jit helpers (:class:`HelperModule`). Anything else is refused with
    the error Triton gives."""
    if isinstance(value, kernels) or isinstance(value, (constexpr, dtypes.dtype)) or _language_module(value):
        return value
    module = getattr(value, "__module__", None) or ""
    if module.startswith("mini_triton.language") and callable(value):
        return value                                   # from triton.language.extra.libdevice import rsqrt
    if type(value) is types.ModuleType and value.__name__.split(".")[0] not in HOST_LIBRARIES:
        return HelperModule(value, where, kernels)
    message = f"{where}: {_refusal(name, value)}"
    runs = _as_written(value, kernels)
    if runs is not None and runtime.RULES == "record":
        runtime.refuse(message)                        # rule mode "record": noted, and the function runs as written
        _BOUND_RULES.append(message)
        return runs
    raise CompilationError(message)


_BOUND_RULES: list = []          # the rules broken by the names bound in the compile now under way (compile_kernel)


def _as_written(value, kernels: tuple):
    """What runs in place of a plain Python function a kernel calls, where that has a meaning (rule mode "record"):
    the function itself, compiled as if it were a @jit helper; None for anything else."""
    if isinstance(value, Foreign):
        return value.stand_in
    if inspect.isfunction(value) and not isinstance(value, kernels):
        return kernels[0](value)
    return None


class Foreign:
    """A kernel's outside name bound, in a process that does not hold it, to its description only (the
    grader's judge compiles a kernel whose module lives in another process): refused as the object would be."""
    NONE = object()

    def __init__(self, type_name: str, is_module: bool, is_function: bool, plain=NONE, name="", stand_in=None):
        self.type_name, self.is_module, self.is_function, self.plain, self.name = (type_name, is_module, is_function,
                                                                                   plain, name)
        self.stand_in = stand_in          # a plain function's def, compiled where it is bound: what runs in its place


def _refusal(name, value) -> str:
    head = f"cannot access the global variable {name} from within a @jit function"
    if isinstance(value, Foreign):
        module, function, number = value.is_module, value.is_function, value.plain
        module_name, type_name = value.name or name, value.type_name
    else:
        module, number = isinstance(value, types.ModuleType), value
        function = inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.ismethod(value)
        module_name, type_name = getattr(value, "__name__", name), type(value).__name__
    if module:
        return (f"{head}: {name} is the module {module_name}, which runs on the host; a kernel can use "
                f"triton.language (tl), math and modules of @triton.jit helpers")
    if function:
        return (f"{head}: {name} is a Python function, which Triton cannot compile; decorate it with "
                f"@triton.jit to call it from a kernel (Triton's compiler refuses a call of a plain function)")
    if isinstance(number, (bool, int, float)) or number is None:
        return (f"{head}: Triton kernels can only use globals that are constexpr; write "
                f"`{name} = tl.constexpr({number!r})` (or pass it as an argument)")
    return (f"{head}: Triton kernels can only use globals that are constexpr, dtypes, the triton modules "
            f"and other @triton.jit functions; {name} is a {type_name}")


def _refused_builtin(name) -> str:
    return (f"`{name}` is not available in a kernel: Triton's compiler knows only the builtins "
            f"{', '.join(sorted(BUILTINS))}")


# ---------------------------------------------------------------------------------------------------------
# compiling a @jit function
# ---------------------------------------------------------------------------------------------------------
class _Attributes(ast.NodeTransformer):
    """``a.b`` -> ``_mini_triton_attribute(a, "b")``; an attribute assigned to is refused."""

    def __init__(self, where):
        self.where = where

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            raise CompilationError(f"{self.where} line {node.lineno}: a kernel cannot assign to an attribute "
                                   f"(`{ast.unparse(node)}`)")
        call = ast.Call(ast.Name(ATTRIBUTE, ast.Load()), [node.value, ast.Constant(node.attr)], [])
        return ast.copy_location(call, node)


class _LoopTypes(ast.NodeTransformer):
    """Around each ``for`` and ``while`` loop: note the types of the variables it carries (those bound before
    it and again inside it) before the loop, and check them at the top of each pass and after the loop.
    Triton's compiler gives a loop-carried variable one type: ``acc = 0.0`` made a block inside the loop
    does not compile, nor a bf16 accumulator given fp32 values."""

    def __init__(self, where, fdef):
        self.where = where
        self.bound = {a.arg: 0 for a in (*fdef.args.posonlyargs, *fdef.args.args, *fdef.args.kwonlyargs)}
        for node in ast.walk(fdef):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self.bound[node.id] = min(self.bound.get(node.id, node.lineno), node.lineno)

    def _loop(self, node):
        self.generic_visit(node)
        inside = {n.id for stmt in node.body for n in ast.walk(stmt)
                  if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        carried = sorted(n for n in inside if self.bound.get(n, node.lineno) < node.lineno)
        if not carried:
            return node
        key = f"_mini_triton_loop_{node.lineno}_{node.col_offset}"

        def call(*args):
            return ast.Expr(ast.Call(ast.Name(LOOP_TYPES, ast.Load()),
                                     [ast.Constant(self.where), ast.Constant(node.lineno), ast.Constant(tuple(carried)),
                                      *args], []))
        before = ast.Assign([ast.Name(key, ast.Store())], call().value)
        check = call(ast.Name(key, ast.Load()))
        node.body = [check, *node.body]
        return [before, node, call(ast.Name(key, ast.Load()))]

    visit_For = visit_While = _loop


class _IfTypes(ast.NodeTransformer):
    """Around each ``if``: the types of the variables its branches assign, before it and after it. When the
    condition is a value the kernel computes (not a constexpr), Triton's compiler joins the branches into one
    value per variable, of one type: a variable bound before the ``if`` keeps its type in the branch that
    assigns it, and one that both branches assign gets the same type from each (`v = tl.load(...)` in one,
    `v = 0.0` in the other does not compile). The branch that did not run is known by its literals only."""

    def __init__(self, where):
        self.where = where

    def visit_If(self, node):
        self.generic_visit(node)
        then, other = _assigned(node.body), _assigned(node.orelse)
        names = sorted(set(then) | set(other))
        if not names:
            return node
        key = f"_mini_triton_if_{node.lineno}_{node.col_offset}"
        cond = ast.Name(f"{key}_cond", ast.Load())
        literal = {"then": {n: v for n, v in then.items() if v is not None},
                   "else": {n: v for n, v in other.items() if v is not None}}
        both = sorted(set(then) & set(other))

        def call(*args):
            return ast.Call(ast.Name(IF_TYPES, ast.Load()), [ast.Constant(self.where), ast.Constant(node.lineno),
                                                             ast.Constant(tuple(names)), *args], [])
        test = ast.Assign([ast.Name(f"{key}_cond", ast.Store())], node.test)
        before = ast.Assign([ast.Name(key, ast.Store())], call())
        node.test = cond
        ran = [ast.Expr(call(ast.Name(key, ast.Load()), cond, ast.Constant(branch), ast.Constant(tuple(both)),
                             ast.Constant(tuple(sorted(literal["else" if branch == "then" else "then"].items())))))
               for branch in ("then", "else")]
        node.body = [*node.body, ran[0]]
        node.orelse = [*node.orelse, ran[1]]
        return [test, before, node]


def _assigned(body) -> dict:
    """{name: the type of the literal it is last given, or None} of the names a branch assigns."""
    out = {}
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        value = n.value
                        out[t.id] = (_literal_type(value.value) if isinstance(value, ast.Constant) else None)
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and isinstance(n.target, ast.Name):
                out[n.target.id] = None
            elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                out.setdefault(n.id, None)
    return out


def _literal_type(value):
    """(shape, dtype name) of a Python literal, as Triton types it when a branch yields it."""
    if isinstance(value, bool):
        return (), repr(dtypes.int1)
    if isinstance(value, int):
        return (), repr(dtypes.int32 if -2**31 <= value < 2**31 else dtypes.int64)
    if isinstance(value, float):
        return (), repr(dtypes.float32)
    return None


def _type_of(value):
    """(shape, dtype name) as Triton types a value a branch yields; None when it is not one (a constexpr)."""
    if isinstance(value, tensor):
        return tuple(value.shape), repr(value.dtype)
    if isinstance(value, (bool, int, float)) and not isinstance(value, constexpr):
        return _literal_type(value)
    return None


def if_types(where, line, names, before=None, cond=None, branch=None, both=(), other=()):
    """Before an if (``before`` None): the types of ``names`` in the caller's frame. At the end of the branch that
    ran, when the condition is a value the kernel computed: refuse a variable whose type differs from its type
    before the if, or, when both branches assign it, from the literal the other branch gives it."""
    local = sys._getframe(1).f_locals
    now = {n: _type_of(local[n]) for n in names if n in local}
    if before is None:
        return now
    if not isinstance(cond, tensor):
        return None                                   # a constexpr condition: only the branch taken is compiled
    other = dict(other)
    for n, ty in now.items():
        was = before.get(n) if n in before else other.get(n) if n in both else None
        if ty is not None and was is not None and (tuple(was[0]), was[1]) != ty:
            theirs = "before the if" if n in before else ("in the " + ("else" if branch == "then" else "then")
                                                           + " branch")
            runtime.refuse(
                f"{where} line {line}: `{n}` is {_say(ty)} in the {branch} branch and {_say(was)} {theirs}; the "
                f"condition is computed in the kernel, so Triton's compiler joins the branches into one value of one "
                f"type (\"Mismatched type for {n} between then block ... and else block ...\"): give `{n}` the "
                f"same shape and dtype on every path (tl.zeros(...), tl.full(...), .to(...))")
    return None


def _say(ty) -> str:
    shape, dtype = ty
    return f"a scalar of {dtype}" if not shape else f"a block of shape {list(shape)} of {dtype}"


def loop_types(where, line, names, before=None):
    """Before a loop (``before`` None): the types of its carried ``names`` in the caller's frame. At the top of a
    pass and after the loop: refuse a carried variable whose type changed, its shape or its dtype, as Triton's
    compiler does (a literal is typed as Triton types it: ``acc = 0.0`` is an fp32 scalar)."""
    local = sys._getframe(1).f_locals
    now = {n: _type_of(local[n]) for n in names if n in local}
    if before is None:
        return now
    for n, ty in now.items():
        was = before.get(n)
        if was is not None and ty is not None and (tuple(was[0]), was[1]) != ty:
            runtime.refuse(f"{where} line {line}: the loop carries `{n}`, which is {_change(was, ty)}; Triton's "
                           f"compiler keeps a loop-carried variable's type, its shape and its dtype (\"Loop-carried "
                           f"variable {n} has initial type ... but is re-assigned to ... in loop\"): "
                           f"{_start_as(n, was, ty)}")
    return None


def _change(was, now) -> str:
    """"a scalar before the loop and a block of shape [32] inside it", or, where only the dtype changed, "of
    tl.bfloat16 before the loop and of tl.float32 inside it (a block of shape [16])"."""
    def shape(s):
        return "a scalar" if not s else f"a block of shape {list(s)}"
    if was[1] == now[1]:
        return f"{shape(was[0])} before the loop and {shape(now[0])} inside it"
    if tuple(was[0]) == tuple(now[0]):
        return f"of {was[1]} before the loop and of {now[1]} inside it ({shape(now[0])})"
    return f"{_say(was)} before the loop and {_say(now)} inside it"


def _start_as(n, was, now) -> str:
    """What to write before the loop so that ``n`` keeps the type the loop gives it."""
    shape, dtype = now
    if tuple(was[0]) == tuple(shape):
        return (f"start it in the dtype the loop gives it ({n} = tl.zeros(..., dtype={dtype}) with the shape it has), "
                f"or cast what the loop assigns back with .to({was[1]})")
    return (f"start it as a block of that shape, {n} = tl.zeros({list(shape) if shape else '()'}, dtype={dtype}), "
            f"written with the block sizes that make it (the constexprs of its tl.arange) so that it holds at every "
            f"launch")


def parse(fn):
    """(source file, the function's FunctionDef with the file's lines and columns)."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError) as e:
        raise CompilationError(f"{fn.__name__}: the source of this @jit function cannot be read ({e}); Triton "
                               f"compiles a kernel from its source, so define it in a file") from None
    tree = ast.parse(textwrap.dedent(source))
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, ast.FunctionDef):
        raise CompilationError(f"{fn.__name__}: @triton.jit takes a function defined with def")
    indent = len(source) - len(source.lstrip(" \t"))
    for node in ast.walk(fdef):                                  # the lines and columns of the file
        if getattr(node, "col_offset", None) is not None:
            node.col_offset += indent
        if getattr(node, "end_col_offset", None) is not None:
            node.end_col_offset += indent
    ast.increment_lineno(fdef, fn.__code__.co_firstlineno - 1)
    return fdef


def check_language(fdef: ast.FunctionDef, name: str):
    """Refuse what Triton's code generator has no visitor for (NOT_IN_KERNELS), the names the simulator's
    own compiled code uses, and list comprehensions over more than one ``for``. Only the body is the
    kernel's: decorators, defaults and annotations run on the host."""
    for node in (n for stmt in fdef.body for n in ast.walk(stmt)):
        if _todo(node):
            continue
        where = f"{name} line {getattr(node, 'lineno', fdef.lineno)}"
        if type(node) in NOT_IN_KERNELS:
            what, instead = NOT_IN_KERNELS[type(node)]
            raise CompilationError(f"{where}: {what} is not part of Triton's kernel language (Triton's compiler "
                                   f"says: unsupported AST node type: {type(node).__name__})"
                                   + (f"; {instead}" if instead else ""))
        if isinstance(node, ast.ListComp) and len(node.generators) != 1:
            raise CompilationError(f"{where}: a list comprehension with more than one `for` is not allowed in a "
                                   f"kernel (Triton's compiler: nested comprehensions are not supported)")
        if isinstance(node, ast.Name) and (node.id.startswith("__") or node.id.startswith("_mini_triton")):
            raise CompilationError(f"{where}: the name `{node.id}` is not allowed in a kernel (names that start "
                                   f"with __ belong to the interpreter)")


def _todo(node) -> bool:
    """``raise NotImplementedError("TODO: ...")``: the starter's unwritten kernels say what to write when
    launched (Triton would refuse the ``raise`` itself)."""
    return (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name)
            and node.exc.func.id == "NotImplementedError" and node.cause is None)


def free_names(fdef: ast.FunctionDef) -> list:
    """The names the function reads but never binds: its globals (and closure variables), in order."""
    bound = {a.arg for a in (*fdef.args.posonlyargs, *fdef.args.args, *fdef.args.kwonlyargs)}
    bound |= {a.arg for a in (fdef.args.vararg, fdef.args.kwarg) if a is not None}
    read = []
    for node in (n for stmt in fdef.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                read.append(node.id)
            else:
                bound.add(node.id)
    return list(dict.fromkeys(n for n in read if n not in bound))


def _as_list(node):
    return node if isinstance(node, list) else [node]


def compile_kernel(fn, kernels: tuple):
    """``fn`` compiled again in the kernel language: its constructs checked, its outside names bound as
    Triton binds them, each attribute read through :func:`attribute`, ``and``/``or`` as boolops.py makes them."""
    fdef = parse(fn)
    check_language(fdef, fn.__name__)
    names = free_names(fdef)
    lines = {}                                         # where each outside name is first read
    for node in (n for stmt in fdef.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Name) and node.id in names:
            lines[node.id] = min(lines.get(node.id, node.lineno), node.lineno)
    # what ran on the host when the def ran (decorators, defaults, annotations) is not compiled again
    fdef.decorator_list, fdef.returns = [], None
    fdef.args.defaults, fdef.args.kw_defaults = [], [None] * len(fdef.args.kwonlyargs)
    for a in (*fdef.args.posonlyargs, *fdef.args.args, *fdef.args.kwonlyargs, fdef.args.vararg, fdef.args.kwarg):
        if a is not None:
            a.annotation = None
    fdef.body = [_Attributes(fn.__name__).visit(stmt) for stmt in fdef.body]
    loops = _LoopTypes(fn.__name__, fdef)
    fdef.body = [new for stmt in fdef.body for new in _as_list(loops.visit(stmt))]
    ifs = _IfTypes(fn.__name__)
    fdef.body = [new for stmt in fdef.body for new in _as_list(ifs.visit(stmt))]
    fdef = boolops.rewrite_tree(fdef)
    module = ast.Module([fdef], [])
    ast.fix_missing_locations(module)
    code = next(c for c in compile(module, fn.__code__.co_filename, "exec").co_consts
                if isinstance(c, types.CodeType) and c.co_name == fn.__name__)
    _BOUND_RULES.clear()
    namespace = {"__builtins__": BUILTINS, ATTRIBUTE: attribute, LOOP_TYPES: loop_types, IF_TYPES: if_types,
                 boolops.HELPER: boolops.BoolOp, "NotImplementedError": NotImplementedError}  # (the starter's TODOs)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    for name in names:
        where = f"{fn.__name__} line {lines[name]}" if name in lines else fn.__name__
        if name in namespace:
            continue
        if name in cells:
            namespace[name] = bind(where, name, cells[name].cell_contents, kernels)
        elif name in fn.__globals__:
            namespace[name] = bind(where, name, fn.__globals__[name], kernels)
        elif name not in BUILTINS and hasattr(builtins, name):
            raise CompilationError(f"{where}: {_refused_builtin(name)}")
    new = types.FunctionType(code, namespace, fn.__name__, fn.__defaults__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__, new.__module__, new.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    new.__annotations__ = dict(fn.__annotations__)
    new.__rules__ = list(_BOUND_RULES)                 # noted again at each launch that runs it (JITFunction.body)
    _BOUND_RULES.clear()
    return new


__all__ = ["compile_kernel", "attribute", "bind", "Foreign", "check_language", "free_names", "BUILTINS",
           "NOT_IN_KERNELS"]
