"""The names of Triton's language a kernel may use, as both sides of a job call them: a launch's description
(submission/client.py) names each outside name of a kernel by these keys, and the judge binds them again
(judge/launches.py) to the same modules of its own simulator."""
import math

import mini_triton

# The modules a kernel may name, as both sides call them; the namespaces whose functions it may name.
LANGUAGE = {"triton": mini_triton, "tl": mini_triton.language, "tl.math": mini_triton.language.math,
            "tl.extra": mini_triton.language.extra, "libdevice": mini_triton.language.extra.libdevice,
            "tl.extra.cuda": mini_triton.language.extra.cuda, "math": math}
NAMESPACES = {k: LANGUAGE[k] for k in ("tl", "tl.math", "libdevice", "tl.extra.cuda")}
MODULES = {module.__name__: name for name, module in LANGUAGE.items()}
