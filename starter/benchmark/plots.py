"""`make bench`'s plots: GB/s against N on the GPU (build/bench_gpu.png), and on the simulator the bytes moved
against a fused kernel's minimum, yours beside PyTorch eager's (build/bench_sim.png). Without matplotlib: no plot.
"""
from rmsnorm_testkit.compare import DTYPES
from rmsnorm_testkit.timing import STEPS, TIMED_DTYPES, copy_bytes, least_bytes


def plot_gpu(rows, path):
    """GB/s against N: GPU time solid, wall time dashed, one colour per provider."""
    plt = pyplot()
    if plt is None or not rows:
        return
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
    for i, dtype_name in enumerate(TIMED_DTYPES):
        dtype = DTYPES[dtype_name]
        big = sorted((N, M, r) for d, M, N, r in rows if d == dtype_name and M * N >= 2 ** 24)
        for j, kind in enumerate(STEPS):
            ax = axes[i][j]
            names = sorted({n for _, _, r in big for n in r["providers"]})
            for k, name in enumerate(names):
                colour = f"C{k}"
                for key, style, label in ((f"{kind}_gpu", "-", f"{name} GPU"), (kind, "--", f"{name} wall")):
                    pts = [(N, least_bytes(kind, (M, N), dtype) / r["providers"][name][key] / 1e6) for N, M, r in big
                           if r["providers"].get(name, {}).get(key)]
                    if pts:
                        ax.plot(*zip(*pts), style, color=colour, marker="o", label=label)
            ax.plot([N for N, _, _ in big], [copy_bytes((M, N), dtype) / r["copy"] / 1e6 for N, M, r in big], "k:",
                    label="copy")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{dtype_name} {'forward' if kind == 'fwd' else 'forward+backward step'}")
            ax.set_ylabel("GB/s")
            ax.grid(True, alpha=0.3)
            if i == 1:
                ax.set_xlabel("N (M·N = 2^26)")
    axes[0][1].legend(fontsize=7, ncol=2)
    save(fig, path)


def plot_sim(rows, path):
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(9, 4.5))
    # A fused forward and a fused backward both sit at 1.00: the forward is drawn wide and hollow, the
    # backward thin with crosses on top, so that each stays visible on the other.
    looks = {"forward": dict(color="C0", marker="o", markersize=11, markerfacecolor="none", linewidth=5, alpha=0.55),
             "backward": dict(color="C1", marker="x", markersize=7, linewidth=1.5)}
    for name, look in looks.items():
        pts = [(N, ratio, eager_ratio) for n, N, ratio, eager_ratio in rows if n == name]
        Ns = [p[0] for p in pts]
        ax.plot(Ns, [p[1] for p in pts], label=f"{name}: yours", zorder=3, **look)
        ax.plot(Ns, [p[2] for p in pts], marker="s", linestyle=":", color=look["color"],
                label=f"{name}: PyTorch eager")
    ax.axhline(1.0, color="k", linestyle="--", label="fused minimum")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N")
    ax.set_ylabel("M·N bytes moved / fused minimum")
    ax.set_title("Memory traffic (mini_triton): your kernels against PyTorch eager")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))   # beside the lines, not on them
    save(fig, path)


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("(matplotlib is not installed: no plot)")
        return None


def save(fig, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nplot: {path}")
