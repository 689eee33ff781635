"""Out-of-bounds reports: which lanes of an access left their tensor, said the way the kernel meant them.

A lane outside the memory its argument spans is a bug a GPU never reports: it reads whatever lies
there, or overwrites a neighbouring tensor. Flat offsets ("offsets 1000-1023 are past the end") are
what the hardware sees; a kernel's author thinks in rows and columns. A kernel addresses a 2-D tile
as ``x_ptr + row * stride + cols``: each row of the block (its last dimension) is one *run* of lanes
along a row of the tensor, and its lanes are shown in the row where the run starts, so that columns
past the end of a row read as such (``x_ptr[36, 100:128]``), even where they land in the next row.

:func:`report` raises the :class:`OutOfBoundsError` of one access (memory.Access) whose bounds check
failed. The error carries what viz.draw_out_of_bounds draws: the argument's layout and, for every
program of the access, the cells its lanes aimed at outside their row or the tensor.
"""
from __future__ import annotations

import torch

from . import runtime
from .errors import OutOfBoundsError, format_offsets

MAX_DRAWN_CELLS = 4096                  # cells enough for a picture: later programs are left out


def report(acc, op: str):
    """Raise the OutOfBoundsError of ``acc``, an access with an active lane outside its buffer: the first
    program (in the chunk's order) that has one, its lanes as indices of the tensor where they have rows."""
    P = int(acc.pids.numel())
    offs = acc.offsets()
    offs = offs.expand(P, *acc.shape) if offs.shape[0] != P else offs
    active = torch.ones_like(offs, dtype=torch.bool) if acc.mask_h is None else acc.mask_h.expand(P, *acc.shape)
    bad = active & ((offs < 0) | (offs >= acc.buf.span))
    prog = int(bad.reshape(P, -1).any(1).nonzero()[0])
    values = offs[prog][bad[prog]].tolist()
    err = OutOfBoundsError(_message(acc, op, prog, values, tensor_lanes(acc.buf, offs[prog], bad[prog])))
    raise _with_cells(err, acc, prog, values, offs, active, bad)


def _message(acc, op, prog, values, lanes) -> str:
    buf = acc.buf
    where = "before the start" if min(values) < 0 else "past the end"
    head = f"out-of-bounds {op} in {runtime.location()}, {runtime.current().launch.describe(int(acc.pids[prog]))}: "
    if lanes is None:
        hint = ("Check the offset arithmetic (or mask those lanes)." if where == "before the start" else
                "Mask the lanes past the end (mask=offs < n) or fix the offset arithmetic.")
        return (f"{head}offsets {format_offsets(values)} are {where} of {buf.describe()}; "
                f"valid offsets are 0–{buf.span - 1}. {hint}")
    shown, hints = lanes
    t = buf.tensor
    return (f"{head}{shown} {'is' if len(values) == 1 else 'are'} {where} of {buf.name}, a tensor of shape "
            f"{tuple(t.shape)} ({buf.elem!r}, rows {t.stride(-2)} element{'' if t.stride(-2) == 1 else 's'} "
            f"apart; flat offsets {format_offsets(values)}, valid 0–{buf.span - 1}). {' '.join(hints)}")


def _with_cells(err, acc, prog, values, offs, active, bad):
    """``err`` with what viz.draw_out_of_bounds needs: the argument, its layout and the bad offsets."""
    buf, t = acc.buf, acc.buf.tensor
    err.argument, err.span, err.offsets = buf.name, buf.span, values
    err.row = t.stride(-2) if t.dim() >= 2 and t.stride(-1) == 1 else max(1, buf.span)
    err.program = int(acc.pids[prog])
    n = t.shape[-1] if t.dim() >= 2 and t.stride(-1) == 1 else err.row
    err.cells_by_program = {}                  # every program of this access whose lanes left their row
    for k in range(int(acc.pids.numel())):
        cells = lane_cells(offs[k], bad[k], err.row, n, active[k])
        if cells:
            err.cells_by_program[int(acc.pids[k])] = cells
        if k == prog:
            err.cells = cells
        if sum(map(len, err.cells_by_program.values())) > MAX_DRAWN_CELLS and k > prog:
            break                              # enough to draw
    return err


# ---------------------------------------------------------------------------
# lanes to rows
# ---------------------------------------------------------------------------
def row_of(offset: int, row_strides) -> tuple[tuple, int]:
    """The row of the tensor that holds flat ``offset``: its index (one entry per stride of
    ``row_strides``, the tensor's strides but the last, outermost first) and its first element."""
    index, rem = [], offset
    for stride in row_strides:
        index.append(rem // stride)
        rem -= index[-1] * stride
    return tuple(index), offset - rem


def block_rows(offs, row_strides, *flags):
    """One program's lanes a block row (the block's last dimension) at a time, as lists: yields
    ``(run, offsets, *flags)``. ``run`` is ``row_of`` the row where the block row's lanes start when they
    are one run along it (they span less than the block's width), else None."""
    width = offs.shape[-1] if offs.dim() else 1
    rows = [f.reshape(-1, width).tolist() for f in (offs, *flags)]
    for o, *fl in zip(*rows):
        yield (row_of(min(o), row_strides) if max(o) - min(o) < width else None), o, *fl


def lane_cells(offs, bad, row: int, n: int | None = None, active=None):
    """(row, column) of each bad lane, a run of lanes along the block's last dimension placed in the row
    where the run starts: ``x_ptr + 5 * 12 + cols`` with cols 12-15 is row 5, columns 12-15.

    With ``n`` (the tensor's row length) and ``active``, the active lanes of a run that reach past
    column n of their row count as bad too: inside the tensor, they read or write the next row."""
    cells = []
    for run, o, b, *act in block_rows(offs, (row,), bad, *([active] if active is not None else [])):
        if run is not None and n is not None and act:
            b = [is_bad or (a and v - run[1] >= n) for v, is_bad, a in zip(o, b, act[0])]
        if not any(b):
            continue
        for v, is_bad in zip(o, b):
            if is_bad:
                (r,), start = run if run is not None else row_of(v, (row,))
                cells.append((r, v - start))
    return cells


def tensor_lanes(buf, offs, bad, shown=3):
    """The bad lanes of one program as indices of the argument tensor, or None where flat offsets say more.

    ``offs``/``bad``: the program's offsets and out-of-bounds lanes, in the block's shape. Lanes that
    share all but the last block index are one run of a row: they are shown against the row where the
    run starts, so that ``x_ptr + row * stride + cols`` with cols past N reads ``x_ptr[36, 100:128]``
    (row 36, columns 100-127: past the end of a row of 100), as its author meant it. Returns
    (text, hints): "x_ptr[36, 100:128] and x_ptr[37:40, 0:128]" and what to mask.
    """
    t = buf.tensor
    if t is None or t.dim() < 2 or t.stride(-1) != 1 or any(s <= 0 for s in t.stride()):
        return None
    runs = []                                   # [lead index tuple, first col, last col]
    for run, o, b in block_rows(offs, t.stride()[:-1], bad):
        if not any(b):
            continue
        if run is None:                         # not one run along a row: flat offsets say more
            return None
        lead, start = run
        cols = [v - start for v, is_bad in zip(o, b) if is_bad]
        runs.append([lead, min(cols), max(cols)])
    merged = _merge_rows(runs)
    texts = [_index_text(buf.name, *r) for r in merged[:shown]]
    text = " and ".join(texts) if len(merged) <= shown else ", ".join(texts) + f" and {len(merged) - shown} more"
    return text, _hints(buf.name, t, merged)


def _kernel_parameters() -> tuple:
    """The names of the running kernel's parameters (the hints name only what the kernel has)."""
    code = runtime.current().launch.code
    return code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def _past_the_last_row(name, rows, params) -> str:
    """What to check when lanes reach rows past a tensor's last one. A kernel that takes a row count can mask a tile
    of rows with it; one that takes none (one row per program) has a row index or a row stride that is off, and the
    stride to look at is the one this tensor has."""
    counts = [p for p in params if p in ("M", "n_rows", "num_rows", "rows") or p.lower().endswith("_rows")]
    stem = name.removesuffix("_ptr").removesuffix("_Ptr").lower()
    strides = [p for p in params if "stride" in p.lower() and stem and stem in p.lower().replace("stride", "")]
    head = f"Rows {rows} and up do not exist ({name} has {rows} rows): "
    stride = f"its own row stride ({' or '.join(strides)})" if strides else "the stride of its own rows"
    check = f"check how the row index is computed and that {name}'s offset uses {stride}."
    if counts:
        return head + f"if a tile runs past the last row, mask them (rows < {counts[0]}); if no program should " \
                      f"reach them, {check}"
    return head + f"each program's row comes from its program id: {check}"


def _merge_rows(runs):
    """Consecutive rows with the same columns as one slice: [lead index, last row, first col, last col]."""
    merged = []
    for lead, c0, c1 in sorted(runs):
        last = merged[-1] if merged else None
        if last and last[0][:-1] == lead[:-1] and last[1] + 1 == lead[-1] and last[2:] == [c0, c1]:
            last[1] = lead[-1]
        else:
            merged.append([lead, lead[-1], c0, c1])
    return merged


def _index_text(name, lead, last_row, c0, c1) -> str:
    rows = f"{lead[-1]}" if last_row == lead[-1] else f"{lead[-1]}:{last_row + 1}"
    cols = f"{c0}" if c0 == c1 else f"{c0}:{c1 + 1}"
    return f"{name}[{', '.join([*map(str, lead[:-1]), rows, cols])}]"


def _hints(name, t, merged) -> list[str]:
    """What to fix, from where the runs lie: past a row's end, past the last row, before the start."""
    n, rows = t.shape[-1], t.shape[0]
    params = _kernel_parameters()
    n_cols = next((p for p in ("n_cols", "N", "ncols", "num_cols", "n_col", "n") if p in params), None)
    hints = []
    if any(c1 >= n for *_, c1 in merged):
        if all(0 < c0 < n for *_, c0, _ in merged):
            # a run that starts inside a row and runs past its end: the row's offset is off, not the mask
            hints.append(f"These lanes start at column {merged[0][2]} of a row, not at column 0: the offset of "
                         f"each row is not a multiple of the row's {n} elements; step from row to row by the "
                         f"tensor's row length or stride ({n_cols + ', or ' if n_cols else ''}the stride the "
                         f"wrapper passes), not by the block width.")
        else:
            hints.append(f"Columns {n} and up are past the end of a row of {n}: mask them "
                         f"({'cols < ' + n_cols if n_cols else 'with the row length'}).")
    if t.dim() == 2 and any(r[1] >= rows for r in merged):
        hints.append(_past_the_last_row(name, rows, params))
    elif any(i >= size for r in merged for i, size in zip((*r[0][:-1], r[1]), t.shape)):
        hints.append("Some indices are past their dimension's size: mask those lanes.")
    if any(r[0][0] < 0 or r[2] < 0 for r in merged):
        hints.append("Negative indices come before the tensor's start: check the offset arithmetic.")
    return hints or ["Mask those lanes or fix the offset arithmetic."]
