"""Pictures of memory traffic: which program touched which element, and how often.

A traffic count says "x was loaded 2.0 times per element"; a picture shows *where*: each tensor
argument of a launch drawn as a grid laid out in rows of its row stride, every element coloured
by the program that read (or wrote) it, with a number where it was read more than once. A fused
forward paints each row of x in one colour, once; a kernel that reads x twice shows a 2 in every
cell. Elements no program touched stay grey: the gap columns of a strided view, or lanes a mask
switched off. Red marks a mistake: elements that several programs wrote (a data race, drawn when
races are recorded or warned about rather than raised), and out-of-bounds lanes, drawn past the
end of their row or of the tensor.

    with triton.record() as rec:
        kernel[grid](...)
    rec.draw("build/traffic.png")                # or viz.draw_recording(rec, "build/traffic.png")

Drawing needs matplotlib; nothing else in the simulator does.
"""
from __future__ import annotations

import math

import torch

UNTOUCHED = (0.93, 0.93, 0.93)
OUT_OF_BOUNDS = (0.85, 0.1, 0.1)
REPEATED = "firebrick"
MAX_LABELLED_CELLS = 600              # more cells than this: colours only, no numbers


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _program_colour(p: int):
    import matplotlib
    return matplotlib.colormaps["tab10"](p % 10)[:3]


def touches(arg, kind: str):
    """(first program, count, repeated) per element of the argument's span, for kind 'load' or 'store'.

    first program is -1 where no program touched the element; repeated says that one program
    touched it more than once (g read once by each of 6 programs is not repeated: x read twice
    by its own program is)."""
    first = torch.full((arg.span,), torch.iinfo(torch.int64).max, dtype=torch.int64)
    count = torch.zeros(arg.span, dtype=torch.int64)
    pairs = []
    for r in arg.records:
        if not (r.kind.reads() if kind == "load" else r.kind.writes()):
            continue
        offs, pids = r.active_offsets()
        count.index_add_(0, offs, torch.ones_like(offs))
        first.scatter_reduce_(0, offs, pids.to(torch.int64), reduce="amin")
        pairs.append(pids.to(torch.int64) * max(1, arg.span) + offs)
    first[count == 0] = -1
    repeated = torch.zeros(arg.span, dtype=torch.bool)
    if pairs:
        keys, times = torch.unique(torch.cat(pairs), return_counts=True)
        repeated[keys[times > 1] % max(1, arg.span)] = True
    return first, count, repeated


def raced(arg):
    """Per element of the argument's span: True where two or more programs stored it (not by an atomic,
    which is made for that), and the programs that did, in order."""
    pairs = []
    for r in arg.records:
        if r.kind.writes() and not r.kind.reads():              # plain stores: atomics may share
            offs, pids = r.active_offsets()
            pairs.append(pids.to(torch.int64) * max(1, arg.span) + offs)
    shared = torch.zeros(arg.span, dtype=torch.bool)
    if not pairs:
        return shared, []
    keys = torch.unique(torch.cat(pairs))                       # one key per (program, element)
    writers = torch.bincount(keys % max(1, arg.span), minlength=arg.span)
    shared = writers > 1
    programs = torch.unique(keys[shared[keys % max(1, arg.span)]] // max(1, arg.span)).tolist()
    return shared, programs


def _grid(values: torch.Tensor, row: int, fill):
    """A 1-D per-element tensor as a (rows, row) grid, padded with ``fill``."""
    rows = max(1, math.ceil(values.numel() / row))
    out = torch.full((rows * row,), fill, dtype=values.dtype)
    out[:values.numel()] = values
    return out.view(rows, row)


def _panel(ax, first, count, repeated, row, title, verb, race=None):
    """One tensor's reads or writes; ``race``: (elements stored by several programs, those programs)."""
    firsts, counts, again = _grid(first, row, -1), _grid(count, row, 0), _grid(repeated, row, False)
    image = torch.tensor([[UNTOUCHED if p < 0 else _program_colour(int(p)) for p in line] for line in firsts.tolist()])
    shared, programs = race if race is not None else (None, [])
    if shared is not None and bool(shared.any()):
        image[_grid(shared, row, False)] = torch.tensor(OUT_OF_BOUNDS, dtype=image.dtype)
    ax.imshow(image.numpy(), aspect="equal", interpolation="nearest")
    if counts.numel() <= MAX_LABELLED_CELLS:
        from matplotlib import patheffects
        from matplotlib.patches import Rectangle
        outline = [patheffects.withStroke(linewidth=2, foreground="white")]
        for (i, j) in (counts > 1).nonzero().tolist():
            ax.text(j, i, str(int(counts[i, j])), ha="center", va="center", fontsize=7, fontweight="bold",
                    path_effects=outline)
            if again[i, j]:                       # one program touched it more than once: outlined in red
                ax.add_patch(Rectangle((j - 0.45, i - 0.45), 0.9, 0.9, fill=False, edgecolor=REPEATED, lw=1.2))
    _frame(ax, firsts.shape)
    touched, shared_n, twice = int((count > 0).sum()), int((count > 1).sum()), int(repeated.sum())
    if programs:
        names = ", ".join(map(str, programs[:6])) + (f" and {len(programs) - 6} more" if len(programs) > 6 else "")
        note = (f"DATA RACE (red): {int(shared.sum())} elements stored by several programs ({names})")
        ax.set_title(f"{title}\n{note}", fontsize=8, color=OUT_OF_BOUNDS)
        return
    if twice:
        note = f"{touched} elements {verb}, {twice} of them more than once by one program"
    elif shared_n:
        note = f"{touched} elements {verb}, {shared_n} of them by several programs (once by each)"
    else:
        note = f"{touched} elements {verb}, each once"
    ax.set_title(f"{title}\n{note}", fontsize=8, color=REPEATED if twice else "black")


def _frame(ax, shape):
    rows, cols = shape
    ax.set_xticks(range(0, cols, max(1, cols // 8)))
    ax.set_yticks(range(0, rows, max(1, rows // 8)))
    ax.tick_params(labelsize=6)
    ax.set_xlabel("column", fontsize=7)
    ax.set_ylabel("row", fontsize=7)


def draw_recording(rec, path, title=None, per_row=4):
    """Per launch, per tensor argument, a panel for its reads and one for its writes (``per_row`` a line)."""
    plt = _pyplot()
    panels = []
    for L in rec.launches:
        for a in L.args.values():
            for verb in ("read", "written"):
                first, count, repeated = touches(a, "load" if verb == "read" else "store")
                if bool((count > 0).any()):
                    name = a.name if len(rec.launches) == 1 else f"{L.kernel}: {a.name}"
                    race = raced(a) if verb == "written" else None
                    panels.append((f"{name} {verb}", verb, a.row, first, count, repeated, race))
    if not panels:
        raise ValueError("nothing to draw: the recording holds no launch that touched memory")
    width = min(per_row, len(panels))
    height = math.ceil(len(panels) / width)
    fig, axes = plt.subplots(height, width, figsize=(3.4 * width, 2.9 * height), squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.axis("off")
            continue
        label, verb, row, first, count, repeated, race = panels[k]
        _panel(ax, first, count, repeated, row, label, verb, race)
    fig.suptitle((title + "\n" if title else "") + "colour: the (first) program that touched the element; number: "
                 "how many times, when more than once (outlined in red: one program more than once); grey: never; "
                 "red: stored by several programs (a data race)", fontsize=9)
    return _save(fig, path)


def draw_out_of_bounds(err, path, title=None):
    """The argument of an OutOfBoundsError as a grid (grey), with the offending lanes in red, placed where
    the kernel aimed them: columns past a row's end stay in that row. Every program of the failing access
    is drawn, not only the one that left the tensor: the earlier ones, whose lanes past their row's end
    silently read (or wrote) the next row, too. A number in a cell names the program."""
    plt = _pyplot()
    row, span = err.row, err.span
    by_program = getattr(err, "cells_by_program", None) or {err.program: err.cells}
    cells = [(r, c, p) for p, cs in by_program.items() for r, c in cs]
    rows = [r for r, _, _ in cells]
    first, last = min(0, *rows), max(math.ceil(span / row) - 1, *rows)
    width = max(row, 1 + max(c for _, c, _ in cells))
    image = torch.ones(last - first + 1, width, 3)
    for r in range(first, last + 1):
        for c in range(min(row, width)):
            if 0 <= r * row + c < span:
                image[r - first, c] = torch.tensor(UNTOUCHED)
    for r, c, _ in cells:
        image[r - first, c] = torch.tensor(OUT_OF_BOUNDS)
    fig, ax = plt.subplots(figsize=(min(12, max(7.0, 2.5 + 0.3 * width)), min(10, 2.2 + 0.35 * image.shape[0])))
    ax.imshow(image.numpy(), aspect="equal", interpolation="nearest")
    if len(cells) <= MAX_LABELLED_CELLS and len(by_program) > 1:
        for r, c, p in cells:
            ax.text(c, r - first, str(p), ha="center", va="center", fontsize=6, color="white")
    _frame(ax, image.shape[:2])
    ax.set_yticks(range(image.shape[0]), [str(first + i) for i in range(image.shape[0])])
    programs = sorted(by_program)
    names = ", ".join(map(str, programs[:8])) + (f" and {len(programs) - 8} more" if len(programs) > 8 else "")
    who = f"program {names}" if len(programs) == 1 else f"programs {names} (the number in a cell)"
    ax.set_title((title + "\n" if title else "") + f"red: lanes of {who} past the end of their row or of "
                 f"{err.argument}\nprogram {err.program} left the tensor; grey: the tensor ({span} elements in rows "
                 f"of {row})", fontsize=9)
    return _save(fig, path)


def _save(fig, path):
    from pathlib import Path
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path
