"""A static scan of a submission, before any of it runs.

It names a missing piece of the required API, and flags what only a scan can catch, because once the
file runs it is too late: forbidden imports, file access, reaching into the interpreter (the way around
the other rules), patching a library, and touching the simulator's own modules (which grade the
submission). ``os`` is allowed for ``os.environ`` only, read or written (the backend choice uses it).
What the grader can see while the file runs is not the scan's business: a call of torch's own
``rms_norm`` on the graded path is named by the grader while it runs, and costs the points of
the outputs it made; in a test of the student's own, it costs nothing.

``RULES`` holds each rule as the handout's section 10 states it, with an example the scan lets through
and one it refuses; the handout's list and the project's tests are made from it.

The grader runs it before a submission is graded; the public tests run it first too
(`make test` prints what it would refuse, with the line and the rule), and so does `make submit`.
"""
from __future__ import annotations

import ast
import typing
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This package, which the public tests share with the grader: its modules time, record and sign a submission in the
# grader, so a submission may not import it.
SHARED = "rmsnorm_testkit"


def _simulator_folder() -> Path | None:
    """mini_triton's folder: beside this folder's parent (the student bundle) or two above (a checkout)."""
    return next((p / "mini_triton" for p in HERE.parents if (p / "mini_triton" / "__init__.py").is_file()), None)


class Rule(typing.NamedTuple):
    says: str          # the handout's words: "the autograder refuses to run a file that <says>"
    allowed: str       # a file the rule lets through
    refused: str       # a file the rule refuses


RULES = {
    "imports": Rule("imports process, network, file, FFI or import-machinery modules (`subprocess`, `socket`, "
                    "`ctypes`, `importlib`, `signal`, `threading`, `concurrent`, `multiprocessing`, `pickle`, "
                    "`inspect`, `gc`, `pathlib`, `io`, `atexit`, ...), or uses `os` for anything but `os.environ`, "
                    "which it may read and write",
                    "import os\nos.environ['MINI_TRITON'] = '1'\nB = os.environ.get('BACKEND', 'auto')\n",
                    "import os\nos.system('ls')\n"),
    "files": Rule("calls `open`, `exec`, `eval`, `compile` or `__import__`, reads or writes files (`torch.save`, "
                  "`.write_text`, ...), or edits `sys.modules`",
                  "import torch\nx = torch.zeros(3).sum()\n", "import torch\ntorch.save(1, 'x.pt')\n"),
    "interpreter": Rule("reaches into the interpreter or a library's private parts: `getattr` with a name made at run "
                        "time (with the name written out, `getattr(tl, \"math\", None)`, it is fine), `setattr`, "
                        "`vars`, `globals`, `__builtins__`, frames, attributes such as `__dict__` and `__class__` "
                        "(`x.__class__.__name__` and `triton.__version__` are fine), a library's names that start with "
                        "`_` (`torch._C`, `torch.utils._python_dispatch`), or `from sys import ...`",
                        "def f(x):\n    return x.__doc__, getattr(x, 'exp', None)\n",
                        "def f(x, name):\n    return getattr(x, name)\n"),
    "patches": Rule("changes attributes of a library, directly or through another name (`torch.allclose = ...`, "
                    "`E = torch.cuda.Event` then `E.record = ...`, `setattr(torch, ...)`), or uses a module other "
                    "than Triton's as a value: another name for it (`T = torch`), an argument, an import's name bound "
                    "again (`np = ...`). Triton's modules may be read as values (`hasattr(tl, \"libdevice\")`, "
                    "`tl.libdevice if ... else tl.math`, a helper given `tl`), and attributes of `self` and `ctx` "
                    "are yours to set",
                    "import triton.language as tl\nlm = tl.libdevice if hasattr(tl, 'libdevice') else tl.math\n",
                    "import torch\ntorch.allclose = None\n"),
    "simulator": Rule("touches the simulator's own modules, which grade your file: its statistics and its race "
                      "check (`mini_triton.stats`, `triton.races`, ...); `triton`, `triton.language` and "
                      "`triton.testing` are yours to use, and so is `triton.runtime.driver` (the device's figures, as "
                      "Triton's tutorials read them)",
                      "import triton\nimport triton.language as tl\nn = triton.cdiv(10, 4)\n",
                      "from mini_triton import stats\n"),
}

REQUIRED = ("rmsnorm_fwd_kernel", "rmsnorm_bwd_kernel", "rmsnorm_forward", "rmsnorm_backward",
            "TritonRMSNorm", "rmsnorm")
FORBIDDEN_MODULES = {"subprocess", "socket", "ctypes", "importlib", "multiprocessing", "shutil", "signal",
                     "pickle", "marshal", "builtins", "gc", "inspect", "threading", "urllib", "http", "requests",
                     "__main__", "runpy", "pty", "resource", "pytest", "_thread", "asyncio", "sysconfig",
                     "pathlib", "io", "tempfile", "glob", "fileinput", "mmap", "fcntl", "posix", "atexit",
                     "weakref", "zipfile", "tarfile", "sqlite3", "code", "codeop", "types", "linecache",
                     "codecs", "tokenize", "pkgutil", "zipimport", "shelve", "dbm", "traceback", "site",
                     "concurrent", "_threading_local",
                     # the CUDA driver by another way than torch and triton (a persisting-L2 window, say)
                     "cuda", "cupy", "pycuda", "numba", "cffi",
                     # the grader's own, loaded in a job: they time, record and sign the submission
                     "autograder", SHARED}
# File access through libraries: torch.save/np.load..., Path.write_text...
FILE_ATTRS = {"write_text", "write_bytes", "read_text", "read_bytes", "tofile", "fromfile", "memmap", "from_file"}
FILE_ATTRS_OF = {"torch": {"save", "load"},
                 "numpy": {"save", "load", "savez", "loadtxt", "savetxt", "genfromtxt", "fromregex"}}
SIMULATOR_INTERNALS = {"reset_stats", "get_stats", "set_race_mode", "stats", "races", "_GLOBAL",
                       "_RECORDERS", "commit_launch", "record", "plan",
                       "unrecorded"}     # (the grader's way to keep its own torch ops out of the host-op record)
# The simulator's own modules: the counts and checks that grade the submission live there. A submission
# needs only triton (jit, cdiv, ...), triton.language and triton.testing.
# Every module of mini_triton but the public ones, read from the folder so that a new module is covered.
PUBLIC_MODULES = {"language", "testing", "autotune", "driver"}
# Triton's public objects that live under the name of one of the simulator's own modules: triton.runtime.driver,
# the device's figures, as Triton's tutorials read them (`triton.runtime.driver.active.get_active_torch_device()`)
PUBLIC_PATHS = {("runtime", "driver")}
_FOLDER = _simulator_folder()
SIMULATOR_MODULES = ({p.stem for p in _FOLDER.glob("*.py")} if _FOLDER else set()) - {"__init__"} - PUBLIC_MODULES
TRITON = ("triton", "mini_triton")
# Modules that must not be reached as an attribute or imported under another module's name either
# (``from torch.serialization import os``, ``torch.serialization.os.listdir``).
REACHED_MODULES = (FORBIDDEN_MODULES | {"os", "sys"}) - {"code", "types", "__main__", "cuda"}   # torch.cuda is fine


# Ways to reach objects a kernel assignment never needs: frames, closures, module dicts, builtins.
INTERPRETER_ATTRS = {"_getframe", "f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "tb_next",
                     "gi_frame", "cr_frame", "ag_frame", "cell_contents", "func_globals", "_current_frames"}
ALLOWED_DUNDERS = {"__name__", "__doc__", "__init__", "__qualname__", "__version__"}
INTERPRETER_NAMES = {"__builtins__", "getattr", "setattr", "delattr", "vars", "globals", "locals", "dir",
                     "__loader__", "__spec__"}


class _NamedGetattr(ast.NodeTransformer):
    """``getattr(obj, "name")`` is ``obj.name``, and ``getattr(obj, "name", default)`` reads ``obj.name`` or gives
    ``default``: with the name written out, a version shim's ``getattr(tl, "math", None)`` is an attribute read,
    held to every rule an attribute is. Rewritten so before the scan; a name made at run time stays a call of
    ``getattr``, which the interpreter rule refuses (it could reach any private name)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        name = node.args[1] if len(node.args) in (2, 3) and not node.keywords else None
        if not (isinstance(node.func, ast.Name) and node.func.id == "getattr" and isinstance(name, ast.Constant)
                and isinstance(name.value, str) and name.value.isidentifier()):
            return node
        read = ast.copy_location(ast.Attribute(node.args[0], name.value, ast.Load()), node)
        return read if len(node.args) == 2 else ast.copy_location(ast.Tuple([read, node.args[2]], ast.Load()), node)


def _imported_names(tree) -> set:
    """Names bound by import statements: modules and whatever was imported from them."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names


def _module_aliases(tree) -> dict:
    """{name: module} for every name an ``import`` binds to a module: ``import os as o`` gives
    {"o": "os"}, ``import numpy as np`` {"np": "numpy"}, ``import os.path`` {"os": "os"}; for a name
    assigned one of them or an attribute of one, its dotted path (``tl = triton.language``: {"tl":
    "triton.language"}; ``T = triton``; a version shim's ``lm = tl.libdevice if ... else tl.math`` takes its first
    branch); and for a parameter of the file's own function that a call hands one of them (``f(triton)``), the
    same: so that the rules below follow a module wherever the file passes it."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def module_path(value):
        choices = _choices(value)                              # (none: an empty tuple)
        dotted = _dotted(choices[0]) if choices else None      # a shim: its first choice
        root, *rest = dotted.split(".") if dotted else [None]
        return ".".join([aliases[root], *rest]) if root in aliases else None

    def bind(name, value):
        path = module_path(value)
        if path is not None and name not in aliases:
            aliases[name] = path
            return True
        return False
    grew = True
    while grew:                                   # an alias of an alias, a module handed on from function to function
        grew = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                grew |= any(bind(t.id, node.value) for t in node.targets if isinstance(t, ast.Name))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions):
                fn = functions[node.func.id].args
                params = [a.arg for a in (*fn.posonlyargs, *fn.args)]
                grew |= any(bind(params[i], arg) for i, arg in enumerate(node.args[:len(params)]))
                grew |= any(bind(k.arg, k.value) for k in node.keywords if k.arg)
    return aliases


def files_beside(source: str, folder) -> list[str]:
    """What ``source`` imports from files that sit beside it in ``folder`` (a helpers module of the student's own,
    ``from my_helpers import ...``): the autograder receives rmsnorm.py alone, so such an import fails there."""
    try:
        tree = ast.parse(source.removeprefix("\ufeff"))
    except SyntaxError:
        return []
    folder, found = Path(folder), []
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        for name in names:
            top = name.split(".")[0]
            if top not in ("mini_triton", SHARED, "tests") and ((folder / f"{top}.py").is_file()
                                                                or (folder / top / "__init__.py").is_file()):
                found.append(f"line {node.lineno}: {top} is a file beside rmsnorm.py; the autograder receives "
                             f"rmsnorm.py alone, so this import fails there: copy what you use of {top} into "
                             f"rmsnorm.py")
    return found


def function_names(source: str) -> set:
    """The names of the functions ``source`` defines (its kernels' among them): the kernels a GPU profile may
    show as the submission's own. Empty if it does not parse."""
    try:
        tree = ast.parse(source.removeprefix("\ufeff"))
    except SyntaxError:
        return set()
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _dotted(node):
    """"a.b.c" for an attribute chain of names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _import_bound(tree) -> set:
    """Names that only ``import`` statements bind to modules (``import x``, ``import x.y as z``)."""
    return {a.asname or a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
            for a in node.names}


def _choices(node) -> list:
    """The values a version shim chooses among, each in turn: both branches of ``a if c else b``, each operand of
    ``a or b``, a named getattr's read and its default (``_NamedGetattr``'s tuple); else the value itself."""
    if isinstance(node, ast.IfExp):
        return _choices(node.body) + _choices(node.orelse)
    if isinstance(node, (ast.BoolOp, ast.Tuple)):
        return [c for v in (node.values if isinstance(node, ast.BoolOp) else node.elts) for c in _choices(v)]
    return [node]


def _triton_value(node, module_of) -> bool:
    """Is ``node`` one of Triton's modules (or something of theirs) read as a value: ``tl``, ``tl.math``, ``tl.libdevice
    if hasattr(tl, "libdevice") else tl.math``, ``getattr(tl, "math", None) or tl``? Version shims pick the language's
    modules this way, and nothing a grade depends on can be patched through them that the rules below miss."""
    def triton(choice):
        dotted = _dotted(choice)
        return dotted is not None and module_of(dotted.split(".")[0]).split(".")[0] in TRITON
    return all(triton(c) or (isinstance(c, ast.Constant) and c.value is None) for c in _choices(node))


def _triton_imports(tree) -> set:
    """Names that every import binding them takes from Triton (``import triton.language as tl``, ``from
    triton.language.extra import libdevice``)."""
    sources = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                sources.setdefault(a.asname or a.name.split(".")[0], set()).add(a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                sources.setdefault(a.asname or a.name, set()).add((node.module or "").split(".")[0])
    return {name for name, roots in sources.items() if roots <= set(TRITON)}


def _rebinds_triton(statement, name, triton_names, module_of) -> bool:
    """``tl = triton.language``, ``libdevice = tl.libdevice if ... else tl.math``: a name Triton's imports bind, bound
    again to one of Triton's modules (a version shim), which is fine."""
    return name in triton_names and isinstance(statement, ast.Assign) and _triton_value(statement.value, module_of)


def _internal(parts) -> bool:
    """Does a dotted path under triton name one of the simulator's own modules or a private name (past a public
    path, ``runtime.driver``, a private name only)?"""
    parts = list(parts)
    public = next((len(p) for p in PUBLIC_PATHS if tuple(parts[:len(p)]) == p), 0)
    return any((p in SIMULATOR_MODULES and i >= public) or p.startswith("_") for i, p in enumerate(parts)
               if p not in PUBLIC_MODULES and p not in ALLOWED_DUNDERS)


def _leads_to_public(node, parents) -> bool:
    """Is attribute ``node`` (``triton.runtime``) the start of a public path (``triton.runtime.driver``)?"""
    parent = parents.get(node)
    return isinstance(parent, ast.Attribute) and parent.value is node and (node.attr, parent.attr) in PUBLIC_PATHS


def _triton_root(node, module_of) -> bool:
    """Is ``node`` (an attribute) reached from a name bound to triton, mini_triton or their submodules?"""
    root = _root(node)
    return root is not None and module_of(root).split(".")[0] in TRITON


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def scan(source: str) -> tuple[list[str], list[str]]:
    """(missing API names, problems found), each a list of messages."""
    missing, found = scan_rules(source)
    return missing, [message for _, message in found]


def scan_rules(source: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(missing API names, [(rule, message)] of the problems found): ``rule`` a key of RULES, or "parse"."""
    source = source.removeprefix("\ufeff")            # a UTF-8 byte-order mark (Windows editors): Python skips it
    try:
        tree = _NamedGetattr().visit(ast.parse(source))
    except SyntaxError as e:
        return [], [("parse", f"rmsnorm.py does not parse: SyntaxError: {e.msg} (line {e.lineno})")]
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    missing = [f"rmsnorm.py does not define {name}" for name in REQUIRED if name not in defined]
    problems = []

    def flag(rule, message):
        problems.append((rule, message))
    imported = _imported_names(tree)
    aliases = _module_aliases(tree)
    modules = _import_bound(tree)
    module_of = lambda name: aliases.get(name, name)                      # noqa: E731
    triton_names = _triton_imports(tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for line, target in _patched_through_names(tree, imported):
        flag("patches", f"line {line}: changing {target} may patch a library object reached through another name; "
                        f"set attributes of self and ctx only (or of objects of your own classes)")
    for node in ast.walk(tree):
        _module_values(node, parents, {n for n in modules if module_of(n) not in ("os", "os.path")
                                       and module_of(n).split(".")[0] not in TRITON}, imported, module_of,
                       triton_names, flag)
        targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)) and _root(t) in imported and not _environ(t, module_of):
                flag("patches", f"line {node.lineno}: changing {ast.unparse(t)} patches a library; that is not "
                                f"allowed")
        line = getattr(node, "lineno", "?")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in TRITON:
                names += [f"{node.module}.{a.name}" for a in node.names]          # from triton import stats
            if isinstance(node, ast.ImportFrom) and all(
                    tuple(f"{node.module}.{a.name}".split(".")[1:3]) in PUBLIC_PATHS for a in node.names):
                names = names[1:]                        # from triton.runtime import driver: the public name alone
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in TRITON:
                for a in node.names:
                    if a.name in SIMULATOR_INTERNALS and not _internal([a.name]):     # (a module: below)
                        flag("simulator", f"line {line}: {node.module}.{a.name} belongs to the grader, not the "
                                          f"submission")
            for name in names:
                parts = name.split(".")
                if parts[0] in FORBIDDEN_MODULES:
                    flag("imports", f"line {line}: importing {name} is not allowed")
                if parts[0] in TRITON and len(parts) > 1 and _internal(parts[1:]):
                    flag("simulator", f"line {line}: {name} is the simulator's own (it grades your submission): "
                                      f"import triton and triton.language only")
            if any(p.startswith("_") and p != "__future__" for name in names for p in name.split(".")):
                flag("interpreter", f"line {line}: importing {next(n for n in names if '._' in '.' + n)} reaches "
                                    f"into a library's private parts; that is not allowed")
            if isinstance(node, ast.ImportFrom) and node.module == "os":
                flag("imports", f"line {line}: from os import ... is not allowed (use os.environ only)")
            elif isinstance(node, ast.ImportFrom) and node.module == "sys":
                flag("interpreter", f"line {line}: from sys import ... is not allowed (it hands out the "
                                    f"interpreter's own objects)")
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name in REACHED_MODULES and (node.module or "").split(".")[0] != a.name:
                        flag("imports", f"line {line}: importing the {a.name} module from {node.module} is not "
                                        f"allowed")
        elif isinstance(node, ast.Attribute):
            name = node.value.id if isinstance(node.value, ast.Name) else None
            base = module_of(name) if name else None
            if base in ("os", "os.path") and node.attr != "environ":
                flag("imports", f"line {line}: {base}.{node.attr} is not allowed (only os.environ)")
            if node.attr == "modules" and base == "sys":
                flag("files", f"line {line}: sys.modules must not be touched")
            if node.attr in FILE_ATTRS or node.attr in FILE_ATTRS_OF.get(base, ()):
                flag("files", f"line {line}: .{node.attr} reads or writes files; that is not allowed")
            if base in TRITON and node.attr in SIMULATOR_INTERNALS:
                flag("simulator", f"line {line}: {ast.unparse(node)} belongs to the grader, not the submission")
            elif _triton_root(node, module_of) and _internal([node.attr]) and not _leads_to_public(node, parents):
                flag("simulator", f"line {line}: {ast.unparse(node)} is the simulator's own (it grades your "
                                  f"submission): use triton's and triton.language's public names only")
            if (node.attr.startswith("_") and not node.attr.startswith("__") and _root(node) in imported):
                flag("interpreter", f"line {line}: {ast.unparse(node)[:60]} is a library's private name; that is "
                                    f"not allowed")
            if node.attr in REACHED_MODULES and base not in (node.attr,):
                flag("imports", f"line {line}: .{node.attr} reaches the {node.attr} module through another one; "
                                f"that is not allowed")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("exec", "eval", "__import__", "compile", "open", "breakpoint"):
                flag("files", f"line {line}: {node.func.id}() is not allowed")
            elif node.func.id in ("setattr", "delattr") and node.args and _root(node.args[0]) in imported:
                flag("patches", f"line {line}: {node.func.id}() on {ast.unparse(node.args[0])} patches a library; "
                                f"that is not allowed")
        if isinstance(node, ast.Attribute) and (node.attr in INTERPRETER_ATTRS or (
                node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDERS)) \
                and not _class_name(node, parents):
            flag("interpreter", f"line {line}: .{node.attr} reaches into the interpreter; that is not allowed")
        if (isinstance(node, ast.Name) and module_of(node.id) in ("os", "os.path") and isinstance(node.ctx, ast.Load)
                and not isinstance(parents.get(node), ast.Attribute)):
            flag("imports", f"line {line}: the os module may be used only as os.environ, not passed around as "
                            f"{node.id}")
        if isinstance(node, ast.Name) and node.id in INTERPRETER_NAMES and isinstance(node.ctx, ast.Load):
            if node.id == "getattr":
                flag("interpreter", f"line {line}: getattr with a name made at run time can reach any private name; "
                                    f"write the name out (x.name, or getattr(x, \"name\", default) for a version "
                                    f"shim)")
            else:
                flag("interpreter", f"line {line}: {node.id} reaches into the interpreter; that is not allowed "
                                    f"(a variable of yours with this name: rename it)")
    return missing, problems


# Attributes of a tensor that code sets as a matter of course (``x.requires_grad = True``).
TENSOR_SETTABLE = {"requires_grad", "grad"}


def _bound_names(target) -> list:
    """The names an assignment target binds (``a``, ``a, b``, ``[a, *b]``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _bound_names(t)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []


def _library_names(tree, imported) -> set:
    """Names bound, anywhere in the file, to a value computed from a library's name (``E = torch.cuda.Event``,
    ``B = E.mro()[1]``, ``for k in vars_of_torch``...): through them a library object can be reached. Followed
    until no more are found."""
    bindings = []                                    # (names bound, the expression they come from)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            bindings += [(_bound_names(t), node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            bindings.append((_bound_names(node.target), node.value))
        elif isinstance(node, ast.NamedExpr):
            bindings.append((_bound_names(node.target), node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            bindings.append((_bound_names(node.target), node.iter))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            bindings += [(_bound_names(i.optional_vars), i.context_expr) for i in node.items if i.optional_vars]
    uses = [(set(bound), {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}) for bound, value in bindings]
    names, grew = set(imported), True
    while grew:
        grew = False
        for bound, used in uses:
            if used & names and not bound <= names:
                names |= set(bound)
                grew = True
    return names - set(imported)


def _patched_through_names(tree, imported):
    """(line, target) of each attribute set on a name that may hold a library object: a name bound from a
    library's value (``_library_names``), a parameter other than a function's first (``self``, ``ctx``,
    ``cls``), or no name at all (``f().x = ...``). Tensor flags such as ``requires_grad`` are fine."""
    library = _library_names(tree, imported)
    params, firsts = set(), set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = [*fn.args.posonlyargs, *fn.args.args]
            firsts |= {args[0].arg} if args else set()
            params |= {a.arg for a in [*args[1:], *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg] if a}
    setters = set()                                  # functions that set attributes of their first parameter
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and [*fn.args.posonlyargs, *fn.args.args]:
            first = [*fn.args.posonlyargs, *fn.args.args][0].arg
            if any(isinstance(t, ast.Attribute) and _root(t) == first for n in ast.walk(fn)
                   for t in getattr(n, "targets", [getattr(n, "target", None)])):
                setters.add(fn.name)
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            if not isinstance(t, ast.Attribute) or t.attr in TENSOR_SETTABLE:
                continue
            root = _root(t)
            if root in imported:
                continue                             # the direct form has its own message (scan_rules)
            if root is None or root in library or (root in params and root not in firsts):
                yield node.lineno, ast.unparse(t)
        # a library object handed to such a function as its first parameter: f(torch.cuda.Event), C.f(...)
        if isinstance(node, ast.Call) and node.args and (
                (isinstance(node.func, ast.Name) and node.func.id in setters) or
                (isinstance(node.func, ast.Attribute) and node.func.attr in setters and
                 isinstance(node.func.value, ast.Name) and node.func.value.id in classes)):
            if {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)} & (library | imported):
                yield node.lineno, f"the attributes of {ast.unparse(node.args[0])} (in {ast.unparse(node.func)})"


def _class_name(node, parents) -> bool:
    """``x.__class__.__name__`` (a ``__repr__``'s usual words): the class's name only, which is fine."""
    parent = parents.get(node)
    return node.attr == "__class__" and isinstance(parent, ast.Attribute) and parent.value is node and \
        parent.attr in ("__name__", "__qualname__")


def _module_values(node, parents, modules, imported, module_of, triton_names, flag):
    """Flag a module used as a value (``T = torch``, ``f(torch)``) and an import's name bound again
    (``np = ...``): past such a line the rules above could not follow it. Triton's modules are not in
    ``modules``: they may be read as values, and bound again to another of Triton's modules."""
    line = getattr(node, "lineno", "?")
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in modules:
        parent = parents.get(node)
        if not (isinstance(parent, ast.Attribute) and parent.value is node):
            flag("patches", f"line {line}: the module {node.id} used as a value; use it as {node.id}.<name> only "
                            f"(import it under the name you want)")
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in imported:
        statement = parents.get(node)
        if not _rebinds_triton(statement, node.id, triton_names, module_of):
            flag("patches", f"line {line}: {node.id}, bound by an import, is bound again; use another name")


def _environ(target, module_of) -> bool:
    """Is the assignment target os.environ[...] (which a submission may write)?"""
    return (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute)
            and target.value.attr == "environ" and isinstance(target.value.value, ast.Name)
            and module_of(target.value.value.id) == "os")
