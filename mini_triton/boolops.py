"""``and`` and ``or`` in a kernel, as Triton compiles them.

Python cannot overload ``and`` and ``or``: ``a and b`` asks ``bool(a)``, which a block of many lanes
cannot answer. Triton's compiler reads the kernel's source instead: between blocks, ``and`` and ``or``
are element-wise logic on int1 blocks (``&`` and ``|``, with a warning for blocks of more than one
element), while plain Python values and constexprs still short-circuit at compile time
(``DEBUG and x > 0`` with DEBUG false never evaluates ``x > 0``). The simulator does the same: as
frontend.py compiles a @jit function again from its source, every ``v1 and v2 ...`` becomes the steps
of a :class:`BoolOp`. ``if`` and ``while`` on a block, and ``not``, still need a single value
(BlockTruthError).
"""
import ast
import warnings

from . import runtime
from .arithmetic import binary
from .blocks import tensor
from .errors import CompilationError

HELPER = "_mini_triton_boolop"           # the name the rewritten source calls BoolOp by (a global)
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
                              ast.Call(ast.Name(HELPER, ast.Load()), [ast.Constant(op)], []))
        steps = [ast.Call(ast.Attribute(start if i == 0 else ast.Name(state, ast.Load()), "add", ast.Load()), [v], [])
                 for i, v in enumerate(node.values)]
        value = ast.Call(ast.Attribute(ast.Name(state, ast.Load()), "value", ast.Load()), [], [])
        pair = ast.Tuple([ast.BoolOp(ast.Or(), steps), value], ast.Load())
        out = ast.Subscript(pair, ast.Constant(1), ast.Load())
        return ast.copy_location(out, node)


def rewrite_tree(fdef: ast.FunctionDef) -> ast.FunctionDef:
    """A @jit function's tree with its ``and``/``or`` evaluated as Triton compiles them; the compiled code
    finds :class:`BoolOp` under the global name ``HELPER`` (frontend.py binds it)."""
    if not any(isinstance(n, ast.BoolOp) for n in ast.walk(fdef)):
        return fdef
    return _Rewriter().visit(fdef)
