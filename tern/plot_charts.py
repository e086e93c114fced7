# The charts of `tern plot` (tern/plot_command.h), drawn with Debian's
# matplotlib (python3-matplotlib, Agg backend: no display needed). The
# binary embeds this file (tern/BUILD, genrule plot_script_cc) and runs it as
#   /usr/bin/python3 -c SCRIPT INPUT.json
# where INPUT.json is tern/plot_data.h's PlotInput: the runs' series, already
# read from their records and summaries. This script only draws.
#
# Output protocol on stdout, one line each, read by tern/plot_command.cc:
#   wrote<TAB>i<TAB>n<TAB>title<TAB>path   a chart is written (i of n)
#   note<TAB>text                          something the user should know
# Exit 3: matplotlib cannot be imported (deploy/install-deps.sh installs it).
import json
import math
import os
import sys

# At most this many points per line: longer runs are averaged in bins of
# consecutive steps, which also smooths the per-step noise of the loss.
MAX_POINTS = 200
PARTS = (("compute_s", "compute"), ("encode_s", "encode"),
         ("network_s", "network"), ("decode_s", "decode"))
# Colours of the time split's parts and the WAN's directions, apart from
# the runs' own colours (matplotlib's default cycle).
PART_COLOURS = ("#8da0cb", "#fc8d62", "#66c2a5", "#e78ac3")
UP_DOWN_COLOURS = ("dimgrey", "silver")


def values(run, key):
    return [math.nan if v is None else float(v) for v in run[key]]


def binned(xs, ys):
    """Means of (x, y) over bins of k consecutive points, and k."""
    k = max(1, math.ceil(len(xs) / MAX_POINTS))
    out_x, out_y = [], []
    for start in range(0, len(xs), k):
        bx = [x for x in xs[start:start + k] if not math.isnan(x)]
        by = [y for y in ys[start:start + k] if not math.isnan(y)]
        out_x.append(sum(bx) / len(bx) if bx else math.nan)
        out_y.append(sum(by) / len(by) if by else math.nan)
    return out_x, out_y, k


def mean_note(k):
    return "" if k == 1 else " (mean of %d steps per point)" % k


class Charts:
    """Draws into out_dir; each run keeps its colour on every chart."""

    def __init__(self, plt, data):
        self.plt = plt
        self.runs = data["runs"]
        self.out_dir = data["out_dir"]
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        if len(self.runs) > len(colours):
            # The default cycle has ten; past that, tab20's twenty, so
            # that eleven codecs in one chart do not share a colour.
            tab20 = plt.get_cmap("tab20")
            colours = [tab20(i) for i in range(tab20.N)]
        for i, run in enumerate(self.runs):
            run["colour"] = colours[i % len(colours)]
        self.has_eval = any(run["test_accuracy"] for run in self.runs)
        self.has_wan = any(run["wan_bytes_up"] is not None
                           for run in self.runs)
        self.has_target = any(run["target_accuracy"] is not None
                              for run in self.runs)

    def figure(self, rows=1, cols=1, **kwargs):
        fig, axes = self.plt.subplots(rows, cols, figsize=(6.4 * cols,
                                                           4.2 * rows),
                                      squeeze=False, **kwargs)
        return fig, axes

    def legend(self, ax):
        if len(self.runs) > 1 or ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")

    def loss(self, ax, x_key):
        k = 1
        for run in self.runs:
            x = values(run, x_key) if x_key != "step" else run["step"]
            bx, by, k = binned([float(v) for v in x], values(run, "loss"))
            ax.plot(bx, by, label=run["label"], color=run["colour"])
        ax.set_xlabel(self.x_label(x_key))
        ax.set_ylabel("training loss (mean over workers)")
        ax.set_title("Loss" + mean_note(k), fontsize="medium")
        ax.grid(alpha=0.3)
        self.legend(ax)

    def accuracy(self, ax, x_key):
        for run in self.runs:
            x = run["eval_step"] if x_key == "step" else values(
                run, "eval_wall_s")
            y = [100 * a for a in values(run, "test_accuracy")]
            ax.plot(x, y, marker="o", markersize=3, label=run["label"],
                    color=run["colour"])
            if run["target_accuracy"] is not None:
                ax.axhline(100 * run["target_accuracy"], color="grey",
                           linestyle=":", linewidth=1)
        ax.set_xlabel(self.x_label(x_key))
        ax.set_ylabel("test accuracy (%)")
        ax.set_title("Test accuracy (worker %d's evaluations)" %
                     self.runs[0]["reference_worker"], fontsize="medium")
        ax.grid(alpha=0.3)
        self.legend(ax)

    def x_label(self, x_key):
        if x_key == "step":
            return "step"
        return "wall time since training began (s)"

    def bytes(self, ax, key, direction):
        for run in self.runs:
            bx, by, k = binned([float(s) for s in run["step"]],
                               values(run, key))
            ax.plot(bx, by, label=run["label"], color=run["colour"])
        fp32 = max(run["fp32_bytes"] for run in self.runs)
        if fp32 > 0:
            ax.axhline(fp32, color="grey", linestyle="--", linewidth=1,
                       label="fp32 would send")
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("bytes per step and worker")
        ax.set_title("%s (codec payload)" % direction, fontsize="medium")
        ax.grid(alpha=0.3, which="both")
        self.legend(ax)

    def split(self, ax, run):
        steps = [float(s) for s in run["step"]]
        layers, k = [], 1
        for key, _ in PARTS:
            bx, by, k = binned(steps, values(run, key))
            layers.append([0.0 if math.isnan(y) else y for y in by])
        ax.stackplot(bx, layers, labels=[name for _, name in PARTS],
                     colors=PART_COLOURS)
        ax.set_xlabel("step")
        ax.set_ylabel("seconds per step (mean over workers)")
        ax.set_title(run["label"] + mean_note(k), fontsize="medium")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="upper right")

    def split_bars(self, ax):
        labels = [run["label"] for run in self.runs]
        left = [0.0] * len(self.runs)
        for (key, name), colour in zip(PARTS, PART_COLOURS):
            means = []
            for run in self.runs:
                v = [x for x in values(run, key) if not math.isnan(x)]
                means.append(sum(v) / len(v) if v else 0.0)
            ax.barh(labels, means, left=left, label=name, color=colour)
            left = [a + b for a, b in zip(left, means)]
        ax.invert_yaxis()
        ax.set_xlabel("seconds per step (mean over steps and workers)")
        ax.set_title("Time split per step", fontsize="medium")
        ax.legend(fontsize="small")

    def wan(self, ax):
        labels = [run["label"] for run in self.runs]
        mib = 1 << 20
        up = [(run["wan_bytes_up"] or 0) / mib for run in self.runs]
        down = [(run["wan_bytes_down"] or 0) / mib for run in self.runs]
        ax.bar(labels, up, label="up (to the GS's region)",
               color=UP_DOWN_COLOURS[0])
        ax.bar(labels, down, bottom=up, label="down",
               color=UP_DOWN_COLOURS[1])
        for i, run in enumerate(self.runs):
            if run["wan_bytes_up"] is None:
                ax.annotate("not measured", (i, 0), ha="center",
                            va="bottom", fontsize="small")
        ax.set_ylabel("MiB over the WAN (whole run)")
        ax.set_title("WAN bytes (summary.json)", fontsize="medium")
        ax.legend(fontsize="small")

    def target(self, ax):
        labels = [run["label"] for run in self.runs]
        times = [run["time_to_target_s"] or 0 for run in self.runs]
        ax.bar(labels, times, color=[run["colour"] for run in self.runs])
        for i, run in enumerate(self.runs):
            if run["time_to_target_s"] is None:
                ax.annotate("not reached", (i, 0), ha="center", va="bottom",
                            fontsize="small")
        targets = sorted({run["target_accuracy"] for run in self.runs
                          if run["target_accuracy"] is not None})
        ax.set_ylabel("seconds of training (evaluations excluded)")
        ax.set_title("Time to %s test accuracy (worker 0)" %
                     " / ".join("%.1f%%" % (100 * t) for t in targets),
                     fontsize="medium")

    def overview(self, fig, axes):
        self.loss(axes[0][0], "step")
        if self.has_eval:
            self.accuracy(axes[0][1], "wall_s")
        else:
            self.loss(axes[0][1], "wall_s")
        self.bytes(axes[1][0], "push_bytes", "Push and pull")
        for run in self.runs:
            bx, by, _ = binned([float(s) for s in run["step"]],
                               values(run, "pull_bytes"))
            axes[1][0].plot(bx, by, color=run["colour"], linestyle="--")
        axes[1][0].set_title("Bytes per step: push (solid), pull (dashed)",
                             fontsize="medium")
        if self.has_wan:
            self.wan(axes[1][1])
        else:
            self.split_bars(axes[1][1])

    def plan(self):
        """(file name, title, rows, cols, draw(fig, axes)) of every chart."""
        n = len(self.runs)
        cols = min(n, 3)
        rows = math.ceil(n / cols)
        charts = [
            ("loss_step", "loss against step", 1, 1,
             lambda f, a: self.loss(a[0][0], "step")),
            ("loss_time", "loss against wall time", 1, 1,
             lambda f, a: self.loss(a[0][0], "wall_s")),
        ]
        if self.has_eval:
            charts += [
                ("accuracy_step", "test accuracy against step", 1, 1,
                 lambda f, a: self.accuracy(a[0][0], "step")),
                ("accuracy_time", "test accuracy against wall time", 1, 1,
                 lambda f, a: self.accuracy(a[0][0], "wall_s")),
            ]
        charts += [
            ("bytes_step", "bytes per step, push and pull", 1, 2,
             lambda f, a: (self.bytes(a[0][0], "push_bytes", "Push"),
                           self.bytes(a[0][1], "pull_bytes", "Pull"))),
            ("time_split", "time split per step", rows, cols,
             self.draw_splits),
        ]
        if self.has_wan:
            charts.append(("wan_bytes", "WAN bytes", 1, 1,
                           lambda f, a: self.wan(a[0][0])))
        if self.has_target:
            charts.append(("time_to_target", "time to target accuracy", 1,
                           1, lambda f, a: self.target(a[0][0])))
        charts.append(("overview", "overview", 2, 2, self.overview))
        return charts

    def draw_splits(self, fig, axes):
        flat = [ax for row in axes for ax in row]
        for ax, run in zip(flat, self.runs):
            self.split(ax, run)
        for ax in flat[len(self.runs):]:
            ax.set_visible(False)
        # One scale for all, so that the panels compare at a glance.
        top = max(ax.get_ylim()[1] for ax in flat[:len(self.runs)])
        for ax in flat[:len(self.runs)]:
            ax.set_ylim(0, top)
        fig.suptitle("Time per step: compute, encode, network, decode")

    def draw_all(self):
        if not self.has_eval:
            print("note\tno test accuracy in the records (tern launch "
                  "--eval_every N evaluates): no accuracy charts",
                  flush=True)
        plan = self.plan()
        for i, (name, title, rows, cols, draw) in enumerate(plan, 1):
            fig, axes = self.figure(rows, cols)
            draw(fig, axes)
            fig.tight_layout()
            path = os.path.join(self.out_dir, name + ".png")
            fig.savefig(path, dpi=100)
            self.plt.close(fig)
            print("wrote\t%d\t%d\t%s\t%s" % (i, len(plan), title, path),
                  flush=True)


def main():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        print("matplotlib: %s" % error, flush=True)
        sys.exit(3)
    with open(sys.argv[1]) as f:
        data = json.load(f)
    Charts(plt, data).draw_all()


main()
