"""Report figures as inline SVG (matplotlib, loaded only here). Okabe-Ito colours, units on every axis."""

from __future__ import annotations

import io

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000")
TERM_COLOURS = {"target weights": "#0072B2", "draft weights": "#56B4E9", "activation peak": "#E69F00",
                "non-torch": "#CC79A7", "CUDA graphs": "#D55E00", "KV cache": "#009E73", "free": "#DDDDDD"}


def _pyplot():
    import matplotlib  # noqa: PLC0415 - heavy: only the report command loads it

    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "specsize", "font.size": 10,
                                "axes.spines.top": False, "axes.spines.right": False})
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def _svg(fig) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog: the SVG is inlined in HTML


def gpu_memory(bars) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    labels = [b.label for b in bars]
    for term in TERM_COLOURS:
        bottoms = []
        heights = []
        for b in bars:
            below = 0.0
            height = 0.0
            for name, value in b.terms:
                if name == term:
                    height = value
                    break
                below += value
            bottoms.append(below)
            heights.append(height)
        ax.bar(labels, heights, bottom=bottoms, color=TERM_COLOURS[term], label=term, width=0.5,
               edgecolor="white", linewidth=0.5, hatch="//" if term == "free" else None)
    ax.axhline(bars[0].budget_gib, color="#000000", linestyle="--", linewidth=1.2,
               label=f"budget {bars[0].budget_gib:.1f} GiB")
    ax.axhline(bars[0].total_gib, color="#000000", linewidth=1.2, label=f"GPU memory {bars[0].total_gib:.1f} GiB")
    ax.set_ylabel("memory per GPU (GiB)")
    ax.set_title("Where each GPU's memory goes")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=8)
    return _svg(fig)


def kv_demand(curve) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    styles = {"p50": ("#009E73", "-"), "p99": ("#E69F00", "-"), "max": ("#D55E00", "--")}
    for label, values in curve.demand_gib:
        colour, style = styles[label]
        ax.plot(curve.concurrency, values, color=colour, linestyle=style, linewidth=2, label=f"{label} requests")
    ax.axhline(curve.capacity_gib, color="#000000", linewidth=1.5, label=f"KV capacity {curve.capacity_gib:.1f} GiB")
    ax.axvline(curve.target, color="#0072B2", linestyle=":", linewidth=1.5, label=f"target concurrency {curve.target}")
    ax.axvline(curve.peak, color="#CC79A7", linestyle="-.", linewidth=1.5, label=f"burst peak {curve.peak}")
    if curve.max_num_seqs <= curve.concurrency[-1]:
        ax.axvline(curve.max_num_seqs, color="#999999", linewidth=1, label=f"max_num_seqs {curve.max_num_seqs}")
    ax.set_xlabel("concurrent requests per replica")
    ax.set_ylabel("KV cache demand per GPU (GiB)")
    ax.set_title("KV demand vs capacity as concurrency grows")
    ax.legend(frameon=False, fontsize=8)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    return _svg(fig)


def speedup(table) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ks = sorted({row.k for row in table.rows})
    for i, k in enumerate(ks):
        rows = sorted((r for r in table.rows if r.k == k), key=lambda r: r.batch_size)
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        ax.plot([r.batch_size for r in rows], [r.speedup for r in rows], marker="o", markersize=3, color=colour,
                label=f"k={k}")
        cross = table.crossover_batch.get(k)
        if cross is not None:
            point = next(r for r in rows if r.batch_size == cross)
            ax.plot([cross], [point.speedup], marker="X", markersize=9, color=colour, linestyle="none")
    ax.axhline(1.0, color="#000000", linewidth=1, linestyle="--", label="no speed-up")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size (concurrent sequences)")
    ax.set_ylabel("speed-up (TPOT without / with speculation)")
    ax.set_title(f"Speed-up vs batch size (a = {table.acceptance_rate:.2f}; X = first batch below 1)")
    ax.legend(frameon=False, fontsize=8, ncol=2)
    return _svg(fig)


def timeline(report) -> str:
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    from .simulation import run_label  # noqa: PLC0415

    plt = _pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(6.4, 6.2), sharex=True)
    runs = [(report.spec, "#0072B2", run_label(report.spec))]
    if report.no_spec is not None:
        runs.append((report.no_spec, "#E69F00", run_label(report.no_spec)))
    for run, colour, label in runs:
        s = run.series
        axes[0].plot(s["t"], [100 * v for v in s["kv_used_fraction"]], color=colour, label=label, linewidth=1.2)
        axes[1].plot(s["t"], s["waiting"], color=colour, label=label, linewidth=1.2)
        axes[2].plot(s["t"], s["preemptions"], color=colour, label=label, linewidth=1.2)
    axes[0].set_ylabel("KV occupancy (%)")
    axes[0].set_ylim(0, 105)
    axes[1].set_ylabel("waiting (requests)")
    axes[2].set_ylabel("preemptions (total)")
    for counts in axes[1:]:  # whole requests and preemptions: from zero, integer ticks, at least up to one
        counts.set_ylim(0, max(1.0, counts.get_ylim()[1]))
        counts.yaxis.set_major_locator(MaxNLocator(integer=True))
    if not any(len(run.series["t"]) for run, _, _ in runs):
        axes[0].text(0.5, 0.5, "no engine step ran: no request was admitted", transform=axes[0].transAxes,
                     ha="center", va="center")
        axes[2].set_xlim(0, 1)
    axes[2].set_xlim(left=0)
    axes[2].set_xlabel("time (s)")
    axes[0].set_title("Burst scenario: KV occupancy, queue and preemptions")
    axes[0].legend(frameon=False, fontsize=8)
    return _svg(fig)
