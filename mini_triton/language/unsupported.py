"""What a kernel hears when it asks for a name the simulator lacks.

Two cases are told apart, with the lists of Triton's own names (names.py): a name Triton has but
mini_triton does not simulate ("not supported", and what to write instead), and a name Triton has
no more than the simulator (a Triton 2 name, a torch or Python name, a typo), which would not compile
on a GPU either: the student is not sent to blame the simulator. ``tl``, ``tl.math``, libdevice and
``tl.extra`` all answer a missing name with :func:`missing_name`. In rule mode "record" (the grader's), a Triton 2
name whose function Triton 3 keeps in libdevice is a compile rule noted on the launch, and that function runs.
"""
import difflib

from .. import runtime
from . import names


class Unsupported(NotImplementedError, AttributeError):
    """A name the simulator does not have (an AttributeError too, so that ``hasattr`` says False)."""


_REMOVED = {"make_block_ptr", "advance"}
# What to write instead of what the simulator does not have.
INSTEAD = {
    "reduce": "tl.sum, tl.max, tl.min, tl.argmax or tl.argmin (a custom combine function is not simulated)",
    "associative_scan": "tl.cumsum or tl.cumprod",
    "rand": "random numbers drawn on the host with torch and passed in as a tensor",
    "randn": "random numbers drawn on the host with torch and passed in as a tensor",
    "randint": "random numbers drawn on the host with torch and passed in as a tensor",
    "inline_asm_elementwise": "tl operations (the simulator runs no PTX)",
    "histogram": "tl.atomic_add of 1 into a tensor of counts",
    "gather": "a load at computed offsets, tl.load(ptr + idx)",
    "sort": "a sort on the host, or a comparison network of tl.where",
    "topk": "tl.max with return_indices=True, repeated",
}
# The names Triton has in each namespace the simulator models.
KNOWN = {"tl": names.TL, "tl.math": names.MATH, "libdevice": names.LIBDEVICE, "tl.extra": names.EXTRA,
         "tl.extra.cuda": names.CUDA}


def unsupported(name, space="tl", offered=()):
    """The error for a name the simulator lacks in ``space`` (a key of KNOWN): one Triton has (not
    simulated), or one Triton lacks too, which would not compile on a GPU either. ``offered``: what the
    simulator has in that space instead, named when Triton has the name."""
    where = f"{runtime.location()}: " if runtime.CURRENT is not None else ""
    if space == "tl" and name in _REMOVED:
        return Unsupported(f"{where}tl.{name}: block pointers were removed from Triton 3.9, the version this course "
                           f"uses (its interpreter says so too); address blocks with pointer arithmetic and "
                           f"masks, ptr + rows[:, None] * stride + cols[None, :], or with a tensor descriptor "
                           f"(tl.make_tensor_descriptor)")
    known = KNOWN[space]
    if name in known and space == "libdevice":
        return Unsupported(f"{where}libdevice.{name} is not in mini_triton's libdevice (Triton has it; the "
                           f"simulator has the math functions kernels commonly call: "
                           f"{', '.join(sorted(offered)[:12])}, ...); write it with tl operations, "
                           f"or see mini_triton/README.md")
    if name in known:
        instead = f"; write {INSTEAD[name]} instead" if name in INSTEAD else ""
        return Unsupported(f"{where}{space}.{name} is not supported by mini_triton{instead} (Triton has it; the "
                           f"simulator covers the subset of Triton used in teaching kernels; see "
                           f"mini_triton/README.md)")
    return Unsupported(f"{where}Triton has no {space}.{name} either: this line would not compile on a GPU "
                       f"(Triton 3.6 and 3.9, the course's versions){_triton_instead(name, space, known)}")


def _triton_instead(name, space, known) -> str:
    """Where Triton 3 keeps ``name``, or the nearest names it has."""
    if space != "libdevice" and name in names.LIBDEVICE:
        then = " (Triton 2 kept CUDA's libdevice functions in tl.math)" if space == "tl.math" else ""
        return (f". Triton 3 has it in libdevice{then}: from triton.language.extra import libdevice, then "
                f"libdevice.{name}(...)")
    if name in names.SYNONYMS:
        return f". Write {names.SYNONYMS[name]} instead"
    if space == "libdevice" and name in names.TL:
        return f". It is tl.{name}"
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.75)
    return f". Did you mean {' or '.join(f'{space}.{c}' for c in close)}?" if close else ""


def missing_name(space, offered=()):
    """A module ``__getattr__`` for the namespace ``space``: every name it does not define raises
    :func:`unsupported` (dunder names stay plain AttributeErrors, as Python's machinery expects)."""
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        error = unsupported(name, space, offered)
        moved = _moved_to_libdevice(name, space)
        if moved is not None and runtime.RULES == "record" and runtime.CURRENT is not None:
            runtime.refuse(str(error))       # rule mode "record": noted, and the function Triton 3 keeps runs
            return moved
        raise error
    return __getattr__


def _moved_to_libdevice(name, space):
    """The simulator's libdevice function of a name Triton 2 kept elsewhere (tl.math.fast_powf), or None: what a
    kernel that uses the old name means, run as written when the compile rule is recorded, not raised."""
    if space == "libdevice" or name not in names.LIBDEVICE:
        return None
    return LIBDEVICE.get(name)


LIBDEVICE: dict = {}            # {name: the simulator's libdevice function}, filled by extra/libdevice.py as it loads
