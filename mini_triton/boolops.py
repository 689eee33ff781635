"""``and`` and ``or`` in a kernel, as Triton compiles them.

Python cannot overload ``and`` and ``or``: ``a and b`` asks ``bool(a)``, which a block of many lanes
cannot answer. Triton's compiler reads the kernel's source instead: between blocks, ``and`` and ``or``
are element-wise logic on int1 blocks (``&`` and ``|``, with a warning for blocks of more than one
element), while plain Python values and constexprs still short-circuit at compile time
(``DEBUG and x > 0`` with DEBUG false never evaluates ``x > 0``). The simulator does the same: each
@jit function whose source has a BoolOp is recompiled, under its own file name and line numbers, with
every ``v1 and v2 ...`` turned into the steps of a :class:`BoolOp`. ``if`` and ``while`` on a block,
and ``not``, still need a single value (BlockTruthError).
"""
import ast
import inspect
import textwrap
import types
import warnings

from . import runtime
from .arithmetic import binary
from .blocks import tensor
from .errors import CompilationError

_HELPER = "_mini_triton_boolop"          # the name the rewritten source calls BoolOp by (a closure cell)
_DEPRECATED = "Logical operators 'and' and 'or' are deprecated for non-scalar tensors; please use '&' or '|' instead"


class BoolOp:
    """One evaluation of ``v1 and v2 ...`` (or ``or``), its operands given one at a time to :meth:`add`."""

    def __init__(self, op):
        self.op = op                   # "and" or "or"
        self.blocks = []               # the operands that are blocks, combined element-wise at the end
        self.last = None
        self.decided = False

    def add(self, value) -> bool:
        """Take the next operand; True when a constant decides the expression (a falsy one for ``and``,
        a truthy one for ``or``): the operands after it are not evaluated."""
        self.last = value
        if isinstance(value, tensor):
            self.blocks.append(value)
            return False
        self.decided = bool(value) is (self.op == "or")
        return self.decided

    def value(self):
        """The expression's value: the deciding constant, or the blocks combined, or the last operand."""
        if self.decided or not self.blocks:
            return self.last
        for b in self.blocks:
            if not b.dtype.is_bool():
                raise CompilationError(f"{runtime.location()}: `{self.op}` needs int1 (boolean) blocks, got a "
                                       f"{b.dtype!r} block; compare it first (x != 0), or use "
                                       f"{'&' if self.op == 'and' else '|'} for a bitwise {self.op}")
        if any(b.shape for b in self.blocks):
            _, line, filename = runtime.site()
            warnings.warn_explicit(_DEPRECATED, UserWarning, filename or "<kernel>", line or 0)
        out = self.blocks[-1]
        for b in reversed(self.blocks[:-1]):
            out = binary(b, out, self.op)
        return out


class _Rewriter(ast.NodeTransformer):
    """``v1 and v2`` -> ``(s := BoolOp("and")).add(v1) or s.add(v2), s.value()`` [1], in one expression."""

    def __init__(self):
        self.count = 0

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        state = f"_mini_triton_boolop_{self.count}"
        self.count += 1
        op = "and" if isinstance(node.op, ast.And) else "or"
        start = ast.NamedExpr(ast.Name(state, ast.Store()),
                              ast.Call(ast.Name(_HELPER, ast.Load()), [ast.Constant(op)], []))
        steps = [ast.Call(ast.Attribute(start if i == 0 else ast.Name(state, ast.Load()), "add", ast.Load()), [v], [])
                 for i, v in enumerate(node.values)]
        value = ast.Call(ast.Attribute(ast.Name(state, ast.Load()), "value", ast.Load()), [], [])
        pair = ast.Tuple([ast.BoolOp(ast.Or(), steps), value], ast.Load())
        out = ast.Subscript(pair, ast.Constant(1), ast.Load())
        return ast.copy_location(out, node)


def rewrite(fn):
    """``fn`` with its ``and``/``or`` evaluated as Triton compiles them, or ``fn`` itself when its source
    has none (or cannot be read)."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return fn
    tree = ast.parse(textwrap.dedent(source))
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
            not any(isinstance(n, ast.BoolOp) for n in ast.walk(fdef)):
        return fn
    indent = len(source) - len(source.lstrip(" \t"))
    for node in ast.walk(fdef):                                  # the lines and columns of the file
        if getattr(node, "col_offset", None) is not None:
            node.col_offset += indent
        if getattr(node, "end_col_offset", None) is not None:
            node.end_col_offset += indent
    ast.increment_lineno(fdef, fn.__code__.co_firstlineno - 1)
    fdef.decorator_list = []
    fdef = _Rewriter().visit(fdef)
    # def outer(<fn's free variables>, helper): def fn(...): ...; return fn -- so that fn keeps its cells
    outer = ast.parse(f"def _mini_triton_outer({', '.join([*fn.__code__.co_freevars, _HELPER])}):\n    pass\n")
    outer.body[0].body = [fdef, ast.Return(ast.Name(fdef.name, ast.Load()))]
    ast.fix_missing_locations(outer)
    try:
        module_code = compile(outer, fn.__code__.co_filename, "exec")
    except SyntaxError:                                          # e.g. a walrus where Python allows none
        return fn
    outer_code = next(c for c in module_code.co_consts if isinstance(c, types.CodeType))
    code = next(c for c in outer_code.co_consts if isinstance(c, types.CodeType) and c.co_name == fn.__name__)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = tuple(cells[n] if n in cells else types.CellType(BoolOp) for n in code.co_freevars)
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__, new.__module__, new.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    new.__annotations__ = dict(fn.__annotations__)
    new.__dict__.update(fn.__dict__)
    return new
