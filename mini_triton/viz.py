"""Pictures of memory traffic: which program touched which element, and how often.

A traffic count says "x was loaded 2.0 times per element"; a picture shows *where*: each tensor
argument of a launch drawn as a grid laid out in rows of its row stride, every element coloured
by the program that read (or wrote) it, with a number where it was read more than once. A fused
forward paints each row of x in one colour, once; a kernel that reads x twice shows a 2 in every
cell. Elements no program touched stay grey: the gap columns of a strided view, or lanes a mask
switched off. An out-of-bounds access is drawn as red cells past the tensor's end.

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
    for r in arg._records:
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


def _grid(values: torch.Tensor, row: int, fill):
    """A 1-D per-element tensor as a (rows, row) grid, padded with ``fill``."""
    rows = max(1, math.ceil(values.numel() / row))
    out = torch.full((rows * row,), fill, dtype=values.dtype)
    out[:values.numel()] = values
    return out.view(rows, row)


def _panel(ax, first, count, repeated, row, title, verb):
    firsts, counts, again = _grid(first, row, -1), _grid(count, row, 0), _grid(repeated, row, False)
    image = torch.tensor([[UNTOUCHED if p < 0 else _program_colour(int(p)) for p in line] for line in firsts.tolist()])
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
    touched, shared, twice = int((count > 0).sum()), int((count > 1).sum()), int(repeated.sum())
    if twice:
        note = f"{touched} elements {verb}, {twice} of them more than once by one program"
    elif shared:
        note = f"{touched} elements {verb}, {shared} of them by several programs, once each"
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
                    panels.append((f"{name} {verb}", verb, a.row, first, count, repeated))
    if not panels:
        raise ValueError("nothing to draw: the recording holds no launch that touched memory")
    width = min(per_row, len(panels))
    height = math.ceil(len(panels) / width)
    fig, axes = plt.subplots(height, width, figsize=(3.4 * width, 2.9 * height), squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.axis("off")
            continue
        label, verb, row, first, count, repeated = panels[k]
        _panel(ax, first, count, repeated, row, label, verb)
    fig.suptitle((title + "\n" if title else "") + "colour: the (first) program that touched the element; number: "
                 "how many times, when more than once (outlined in red: one program more than once); grey: never",
                 fontsize=9)
    return _save(fig, path)


def draw_out_of_bounds(err, path, title=None):
    """The argument of an OutOfBoundsError as a grid (grey), with its program's offending lanes in red,
    placed where the kernel aimed them: columns past a row's end stay in that row."""
    plt = _pyplot()
    row, span = err.row, err.span
    rows = [r for r, _ in err.cells]
    first, last = min(0, *rows), max(math.ceil(span / row) - 1, *rows)
    width = max(row, 1 + max(c for _, c in err.cells))
    image = torch.ones(last - first + 1, width, 3)
    for r in range(first, last + 1):
        for c in range(min(row, width)):
            if 0 <= r * row + c < span:
                image[r - first, c] = torch.tensor(UNTOUCHED)
    for r, c in err.cells:
        image[r - first, c] = torch.tensor(OUT_OF_BOUNDS)
    fig, ax = plt.subplots(figsize=(min(12, 2.5 + 0.3 * width), min(10, 1.8 + 0.35 * image.shape[0])))
    ax.imshow(image.numpy(), aspect="equal", interpolation="nearest")
    _frame(ax, image.shape[:2])
    ax.set_yticks(range(image.shape[0]), [str(first + i) for i in range(image.shape[0])])
    ax.set_title((title + "\n" if title else "") + f"program {err.program}: its lanes outside {err.argument} in "
                 f"red (grey: the tensor, {span} elements in rows of {row})", fontsize=9)
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
