"""Heat maps, histograms, folded stacks, flame graphs and the Perfetto export, on small
cases whose answers are worked out by hand."""

import html
import json
import re
import shutil
import subprocess
import xml.dom.minidom

import numpy as np
import pandas as pd
import pytest

from analysis import DRIVER
from analysis.errors import UsageError
from analysis.model import heatmaps
from analysis.render import flame, perfetto, plots
from analysis.run import export, flamegraphs
from analysis.store import folded as folded_file
from analysis.store import records, symbols
from analysis.store.jsonfiles import Samples, Workload, tasks_from_json
from conftest import check_trace_events, make_iterations


def breakdown_folded(breakdown, components, kernel=None):
    """A per-iteration breakdown frame -> folded stacks, as the report draws them from its
    columns' sums (flame.totals_by_metric, then flame.folded_from_totals)."""
    names = [c for c in breakdown.columns if c in components or ("." in c and c.split(".", 1)[1] in components)]
    totals = flame.totals_by_metric(breakdown["metric"], lambda c: breakdown[c].to_numpy(), names)
    return flame.folded_from_totals(totals, components, kernel)


# --- heat maps ----------------------------------------------------------------


def test_latency_heatmap_puts_each_iteration_in_its_cell():
    # Latencies 100, 1000, 10000 ns at 1 bucket per decade; starts 0, 1.5, 3 s -> 3 time buckets of 1 s.
    it = make_iterations([100, 1000, 10000])
    it["t_start_ns"] = np.array([0, 1_500_000_000, 3_000_000_000])
    g = heatmaps.latency_heatmap(it, "rtt", time_buckets=3, per_decade=1)
    assert list(g.y_edges) == [100, 1000, 10000]  # the maximum falls in the last, closed bucket
    assert g.counts.tolist() == [[1, 0, 0], [0, 1, 1]]
    assert g.counts.sum() == 3


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_latency_heatmap_counts_equal_n(n):
    rng = np.random.default_rng(n)
    it = make_iterations(rng.lognormal(9, 1, n).astype(np.int64) + 1)
    assert heatmaps.latency_heatmap(it, "rtt").counts.sum() == n


def test_breakdown_heatmap_shares_per_percentile_bucket():
    # Ten iterations 1..10 ns: the lower half all user, the upper half all syscall.
    lat = np.arange(1, 11, dtype=float)
    bd = pd.DataFrame(
        {
            "metric": "rtt",
            "latency_ns": lat,
            "user": np.where(lat <= 5, lat, 0.0),
            "syscall": np.where(lat > 5, lat, 0.0),
        }
    )
    grid, counts = heatmaps.breakdown_heatmap(bd, "rtt", edges=(0, 50, 100))
    assert grid.y_names == ["user", "syscall"]
    assert counts.tolist() == [5, 5] and counts.sum() == 10
    assert grid.counts.tolist() == [[1.0, 0.0], [0.0, 1.0]]


@pytest.mark.parametrize("n,ties", [(1, 1), (7, 3), (100, 5), (1000, 1000), (999, 7), (70001, 10**6)])
@pytest.mark.parametrize("dtype", [np.int64, np.float64])  # the file's, a frame's
@pytest.mark.parametrize("others", [0, 300])  # rows of another metric among them
def test_breakdown_heatmap_buckets_are_the_ranks_percentiles(n, ties, dtype, others):
    """Each iteration in the bucket of its rank's percentile (rank + 0.5) * 100 / n, the
    rank its place in a stable sort (ties apart), worked out here one rank at a time; the
    shares are np.bincount's sums of the bucket's rows in their order, bit for bit."""
    rng = np.random.default_rng(n)
    lat = rng.integers(1, ties + 1, n).astype(dtype) * 100
    user = rng.random(n) * 50
    mine = np.sort(rng.permutation(n + others)[:n])  # where the metric's rows are
    metric = np.full(n + others, "other")
    metric[mine] = "rtt"
    bd = pd.DataFrame(
        {
            "metric": pd.Categorical(metric),
            "latency_ns": np.zeros(n + others, dtype) + 7,
            "user": rng.random(n + others),
        }
    )
    bd.loc[mine, "latency_ns"] = lat
    bd.loc[mine, "user"] = user
    edges = heatmaps.PERCENTILE_EDGES
    grid, counts = heatmaps.breakdown_heatmap(bd, "rtt")
    bucket = np.empty(n, int)
    for rank, i in enumerate(sorted(range(n), key=lambda i: lat[i])):
        pct = (rank + 0.5) * 100.0 / n
        bucket[i] = max(k for k in range(len(edges) - 1) if edges[k] <= pct)
    assert counts.tolist() == np.bincount(bucket, minlength=len(edges) - 1).tolist()
    want = np.bincount(bucket, weights=user, minlength=len(edges) - 1)
    total = np.bincount(bucket, weights=lat.astype(np.float64), minlength=len(edges) - 1)
    assert grid.counts[0].tolist() == np.divide(want, total, out=np.zeros_like(want), where=total > 0).tolist()


def test_breakdown_heatmap_column_shows_a_mixed_tail():
    # Bucket p90-100 holds only the slowest iteration: 30 ns user + 70 ns irq of 100.
    lat = np.array([10.0] * 9 + [100.0])
    bd = pd.DataFrame(
        {"metric": "rtt", "latency_ns": lat, "user": np.array([10.0] * 9 + [30.0]), "irq": np.array([0.0] * 9 + [70.0])}
    )
    grid, _ = heatmaps.breakdown_heatmap(bd, "rtt", edges=(0, 90, 100))
    assert grid.y_names == ["user", "irq"]
    assert grid.counts[:, 1].tolist() == [0.3, 0.7]
    assert grid.counts[:, 0].tolist() == [1.0, 0.0]


# --- histograms ---------------------------------------------------------------


def test_histogram_finds_two_peaks_of_a_bimodal_latency():
    # The shape 003 saw: most round trips near 5.5 us, a second group near 20 us.
    rng = np.random.default_rng(3)
    v = np.concatenate([rng.normal(5500, 300, 7000), rng.normal(20000, 1200, 3000)])
    h = heatmaps.histogram(v, "rtt")
    assert h.counts.sum() == len(v)
    assert len(h.peaks_ns) == 2
    assert abs(h.peaks_ns[0] - 5500) / 5500 < 0.1 and abs(h.peaks_ns[1] - 20000) / 20000 < 0.1
    assert h.peak_shares == pytest.approx([0.7, 0.3], abs=0.02)


def test_histogram_of_one_mode_has_one_peak_holding_everything():
    v = np.random.default_rng(4).lognormal(np.log(3000), 0.1, 5000)
    h = heatmaps.histogram(v, "rtt")
    assert len(h.peaks_ns) == 1 and h.peak_shares[0] == pytest.approx(1.0)
    assert abs(h.peaks_ns[0] - 3000) / 3000 < 0.1


@pytest.mark.parametrize("n", [600, 6000, 60000, 600000])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_skewed_single_mode_is_one_peak_at_any_count(n, seed):
    # Counting noise in the buckets (and in the sparse tail) is no mode.
    v = np.random.default_rng(seed).gamma(4.0, 1000.0, n) + 5000
    assert len(heatmaps.histogram(v, "rtt").peaks_ns) == 1


def test_two_modes_a_few_buckets_apart_are_two_peaks():
    # The shape of a cross-CPU pipe run here: most round trips near 46 us, a second group near
    # 55 us (18 % apart: three log buckets), a dip to a fifth between them. Smoothed over 1.5
    # buckets they were one peak.
    rng = np.random.default_rng(7)
    v = np.concatenate([rng.normal(46000, 1200, 4000), rng.normal(54600, 1500, 2000)])
    h = heatmaps.histogram(v, "rtt")
    assert len(h.peaks_ns) == 2
    assert abs(h.peaks_ns[0] - 46000) / 46000 < 0.05 and abs(h.peaks_ns[1] - 54600) / 54600 < 0.05
    assert h.peak_shares == pytest.approx([2 / 3, 1 / 3], abs=0.05)


def test_histogram_linear_axis_and_constant_values():
    h = heatmaps.histogram(np.full(50, 700.0), "rtt", log=False)
    assert h.counts.sum() == 50 and len(h.peaks_ns) == 1


# --- folded stacks and trees -------------------------------------------------------


@pytest.mark.parametrize(
    "lo_ns, hi_ns, labels",
    [
        (10, 2e6, ["10", "100", "1k", "10k", "100k", "1M"]),  # decades
        (3e3, 3e4, ["5k", "10k", "20k"]),  # 1-2-5 steps
        (6.5e3, 2.1e4, ["7k", "8k", "9k", "10k", "20k"]),  # every multiple
        (7.1e3, 7.8e3, ["7.17k", "7.44k", "7.73k"]),  # no multiple inside
    ],
)
def test_log_ticks_label_their_own_position_inside_the_range(lo_ns, hi_ns, labels):
    lo, hi = np.log10(lo_ns), np.log10(hi_ns)
    major, names, minor = plots.log_ticks(lo, hi)
    assert names == labels
    assert np.all((major >= lo) & (major <= hi)) and np.all((minor >= lo) & (minor <= hi))
    for pos, name in zip(major, names):  # each label names the value at its place
        value = float(name.rstrip("kM")) * {"k": 1e3, "M": 1e6}.get(name[-1], 1)
        assert abs(10**pos - value) <= 1e-9 * value
    assert not set(np.round(major, 9)) & set(np.round(minor, 9))


def test_plots_draw_the_three_pictures():
    it = make_iterations(list(np.geomspace(1e3, 5e5, 200)))
    it["t_start_ns"] = np.arange(200) * 1_000_000
    bd = it.assign(**{c: it["latency_ns"] / 8 for c in heatmaps.COMPONENTS})
    pictures = [
        plots.latency_heatmap(heatmaps.latency_heatmap(it, "rtt"), "l.png"),
        plots.breakdown_heatmap(heatmaps.breakdown_heatmap(bd, "rtt")[0], "b.png"),
        plots.histogram(heatmaps.histogram(it["latency_ns"], "rtt"), "h.png"),
    ]
    assert [p.name for p in pictures] == ["l.png", "b.png", "h.png"]
    for p in pictures:
        assert p.png[:8] == b"\x89PNG\r\n\x1a\n"


def test_folded_round_trip_and_tree_values(tmp_path):
    s = pd.Series([5, 3, 2, 1], index=["a;b;c", "a;b", "x;y", "a;b"])
    path = folded_file.write_folded(tmp_path / "t.folded", s.groupby(level=0).sum())
    back = folded_file.read_folded(path)
    assert back.to_dict() == {"a;b;c": 5, "a;b": 4, "x;y": 2}
    tree = flame.to_tree(back)
    assert tree["value"] == 11
    a = next(c for c in tree["children"] if c["name"] == "a")
    assert a["value"] == 9 and a["children"][0]["value"] == 9  # b: 4 own + 5 in c


def test_read_folded_rejects_a_malformed_line(tmp_path):
    p = tmp_path / "bad.folded"
    p.write_text("a;b 3\na;b three\n")
    with pytest.raises(UsageError, match="bad.folded:2"):
        folded_file.read_folded(p)


def test_clean_frame_keeps_lines_parseable():
    assert flame.clean_frame("a;b c\n") == "a_b_c_"


def _breakdown_frame():
    # Two iterations of 100 ns each; the critical path: user 30+30, syscall 50+40, blocked 10+20,
    # residual (no known state) 0+5: 185 of 200 ns, so 15 ns are in no component at all and the
    # closure residual (latency less the measured components) is 20 ns. Sides: measuring has 2/3
    # of the user time; syscall time is split 1:1.
    return pd.DataFrame(
        {
            "metric": pd.Categorical(["rtt", "rtt"]),
            "latency_ns": [100, 100],
            "user": [30.0, 30.0],
            "syscall": [50.0, 40.0],
            "blocked": [10.0, 20.0],
            "residual": [0.0, 5.0],
            "measuring.user": [20.0, 20.0],
            "peer.user": [10.0, 10.0],
            "measuring.syscall": [25.0, 20.0],
            "peer.syscall": [25.0, 20.0],
            "measuring.blocked": [50.0, 60.0],
            "peer.blocked": [40.0, 40.0],
        }
    )


def test_breakdown_flame_weights_add_up_to_latency_within_the_closure_residual():
    bd = _breakdown_frame()
    folded = breakdown_folded(bd, ["user", "syscall", "blocked", "residual"])
    assert folded.to_dict() == {
        "rtt;measuring;user": 40,
        "rtt;peer;user": 20,
        "rtt;measuring;syscall": 45,
        "rtt;peer;syscall": 45,
        "rtt;-;blocked": 30,
        "rtt;-;residual": 5,
    }
    latency = bd["latency_ns"].sum()
    closure_residual = latency - bd[["user", "syscall", "blocked"]].sum().sum()
    assert folded.sum() == 185
    assert 0 <= latency - folded.sum() <= closure_residual == 20


def test_breakdown_flame_splits_syscall_time_by_sampled_kernel_functions(tmp_path):
    ksyms = tmp_path / "kallsyms"
    ksyms.write_text(
        "ffffffff81000000 T do_syscall_64\nffffffff81000100 T anon_pipe_read\nffffffff81000200 T _copy_to_iter\n"
    )
    k = symbols.KernelSymbols(ksyms)
    # The measuring thread (tid 1): 3 samples with _copy_to_iter innermost, 1 in anon_pipe_read;
    # a user-mode sample (no kernel stack) and another process's sample do not count.
    samples = {
        "oncpu": [
            {"tid": 1, "count": 3, "kstack": [0xFFFFFFFF81000210, 0xFFFFFFFF81000110, 0xFFFFFFFF81000010]},
            {"tid": 1, "count": 1, "kstack": [0xFFFFFFFF81000110, 0xFFFFFFFF81000010]},
            {"tid": 1, "count": 5, "kstack": []},
            {"tid": 7, "count": 9, "kstack": [0xFFFFFFFF81000110]},
        ]
    }
    shares = flame.kernel_shares(_on_cpu(samples["oncpu"]), {1: "measuring", 2: "peer"}, k)
    assert list(shares) == ["measuring"]
    assert shares["measuring"].to_dict() == {"_copy_to_iter": 0.75, "anon_pipe_read": 0.25}
    bd = _breakdown_frame()
    folded = breakdown_folded(bd, ["user", "syscall", "blocked", "residual"], shares)
    # measuring's 45 ns of syscall: 33.75 -> 34 in _copy_to_iter, 11.25 -> 11 in anon_pipe_read
    assert folded["rtt;measuring;syscall;_copy_to_iter_[k]"] == 34
    assert folded["rtt;measuring;syscall;anon_pipe_read_[k]"] == 11
    assert folded["rtt;peer;syscall"] == 45 and folded.sum() == 185


def _on_cpu(entries):
    """samples.json's typed form of on-CPU entries given by tid, count and kernel stack (each
    thread its own process)."""
    return Samples.from_json({"oncpu": [{"pid": e["tid"], **e} for e in entries]})


# kallsyms for the stack cases below: kernel text, the tracepoint dispatcher, a BPF program.
_STACK_KSYMS = (
    "ffffffff81000000 T entry_SYSCALL_64\nffffffff81000100 T do_syscall_64\n"
    "ffffffff81000200 T syscall_trace_enter\nffffffff81000300 t __bpf_trace_sys_enter\n"
    "ffffffff81000400 t bpf_trace_run2\nffffffffc0000700 t bpf_prog_0123456789abcdef_sys_enter\n"
)
ENTRY, DO_SYSCALL, TRACE_ENTER, BPF_TRACE, TRACE_RUN, PROG = (
    0xFFFFFFFF81000010,
    0xFFFFFFFF81000110,
    0xFFFFFFFF81000210,
    0xFFFFFFFF81000310,
    0xFFFFFFFF81000410,
    0xFFFFFFFFC0000710,
)


@pytest.mark.parametrize(
    "kstack,frames",
    [
        ([TRACE_ENTER, DO_SYSCALL, ENTRY], ["syscall_trace_enter", "do_syscall_64", "entry_SYSCALL_64"]),
        # interrupted inside a probe: its frames up to the dispatcher go, the caller is innermost
        (
            [PROG, TRACE_RUN, BPF_TRACE, TRACE_ENTER, DO_SYSCALL, ENTRY],
            ["syscall_trace_enter", "do_syscall_64", "entry_SYSCALL_64"],
        ),
        # the unwinder stopped in the probe's JIT code or its dispatcher: the time is the probe's
        ([PROG], [flame.IN_PROBE_FRAME]),
        ([TRACE_RUN, BPF_TRACE], [flame.IN_PROBE_FRAME]),
        ([], []),
    ],
)
def test_kernel_frames_leave_out_the_probe_but_never_a_sampled_stack(tmp_path, kstack, frames):
    ksyms = tmp_path / "kallsyms"
    ksyms.write_text(_STACK_KSYMS)
    assert flame.kernel_frames(kstack, symbols.KernelSymbols(ksyms)) == frames


@pytest.mark.parametrize(
    "oncpu,shares",
    [
        ([{"tid": 1, "count": 3, "kstack": [TRACE_ENTER, DO_SYSCALL]}], {"syscall_trace_enter": 1.0}),
        # a stack of probe frames only (seen: one BPF JIT address) counts as time in the probe
        (
            [{"tid": 1, "count": 3, "kstack": [TRACE_ENTER, DO_SYSCALL]}, {"tid": 1, "count": 1, "kstack": [PROG]}],
            {"syscall_trace_enter": 0.75, flame.IN_PROBE_FRAME: 0.25},
        ),
        ([{"tid": 1, "count": 2, "kstack": [TRACE_RUN]}], {flame.IN_PROBE_FRAME: 1.0}),
        # user-mode samples (no kernel stack) have no kernel function
        ([{"tid": 1, "count": 5, "kstack": []}], None),
    ],
)
def test_kernel_shares_of_stacks_with_and_without_probe_frames(tmp_path, oncpu, shares):
    ksyms = tmp_path / "kallsyms"
    ksyms.write_text(_STACK_KSYMS)
    got = flame.kernel_shares(_on_cpu(oncpu), {1: "measuring"}, symbols.KernelSymbols(ksyms))
    assert ({r: s.to_dict() for r, s in got.items()} or None) == (shares and {"measuring": shares})


# --- sampled stacks ----------------------------------------------------------------


def _nm_symbol(binary, name):
    out = subprocess.run(["nm", "--defined-only", str(binary)], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name and parts[1] in "tT":
            return int(parts[0], 16)
    return None


def test_elf_symbols_agree_with_nm():
    binary = DRIVER
    if not binary.exists() or shutil.which("nm") is None:
        pytest.skip("needs the built driver and binutils")
    vaddr = _nm_symbol(binary, "main")
    syms = symbols.ElfSymbols(binary)
    offset = next(off + (vaddr - va) for off, va, size in syms.loads if va <= vaddr < va + size)
    assert syms.name(offset) == "main"
    assert syms.name(offset + 1) == "main"


def test_fold_samples_keeps_every_sample_and_orders_frames(tmp_path):
    ksyms = tmp_path / "kallsyms"
    ksyms.write_text(
        "ffffffff81000000 T entry_SYSCALL_64\nffffffff81000100 T do_syscall_64\n"
        "ffffffff81000200 T anon_pipe_write\nffffffff81000300 t bpf_trace_run4\n"
        "ffffffff81000400 d some_data\n"
    )
    k = symbols.KernelSymbols(ksyms)
    samples = {
        "maps": {"10": [{"start": 0x400000, "end": 0x401000, "offset": 0, "path": "[vdso]"}]},
        "oncpu": [
            # innermost first, as the kernel gives them
            {
                "pid": 10,
                "tid": 10,
                "comm": "ipcbench",
                "lost": False,
                "count": 7,
                "kstack": [0xFFFFFFFF81000210, 0xFFFFFFFF81000110, 0xFFFFFFFF81000010],
                "ustack": [0x400010],
            },
            {"pid": 10, "tid": 10, "comm": "ipcbench", "lost": True, "count": 2, "kstack": [], "ustack": []},
            {
                "pid": 10,
                "tid": 11,
                "comm": "ipcbench",
                "lost": False,
                "count": 1,
                "kstack": [0xFFFFFFFF81000210, 0xFFFFFFFF81000110, 0xFFFFFFFF81000010],
                "ustack": [0x400010],
            },
        ],
        "offcpu": [
            {
                "pid": 10,
                "tid": 10,
                "comm": "ipcbench",
                "lost": False,
                "count": 3,
                "ns": 900,
                "kstack": [0xFFFFFFFF81000300, 0xFFFFFFFF81000210],
                "ustack": [0x999999],
            }
        ],
    }
    on, off = flame.fold_samples(Samples.from_json(samples), k, symbols.UserSymbols(Samples.from_json(samples).maps))
    assert on.sum() == 10 and off.sum() == 900
    assert on["ipcbench;[vdso];entry_SYSCALL_64_[k];do_syscall_64_[k];anon_pipe_write_[k]"] == 8
    assert on["ipcbench;[stack lost]"] == 2
    # the sampler's own frame (bpf_trace_run4) is cut off; an unmapped user address stays visible
    assert off.index.tolist() == ["ipcbench;[unknown];anon_pipe_write_[k]"]


# --- SVG ------------------------------------------------------------------------


@pytest.mark.skipif(flamegraphs.chromium() is None, reason="chromium renders the flame graph SVGs")
def test_svgs_are_valid_xml_and_hold_every_frame(tmp_path):
    folded = pd.Series([5, 3, 2], index=["main;a<b>;c&d", "main;e", "other"])
    paths = flamegraphs.write_svgs(
        tmp_path, {"oncpu": (folded, "on-CPU: test", "samples"), "empty": (pd.Series(dtype=np.int64), "empty", "ns")}
    )
    assert [p.name for p in paths] == ["flamegraph-oncpu.svg"]
    doc = xml.dom.minidom.parse(str(paths[0]))
    names = {g.getAttribute("name"): g for g in doc.getElementsByTagName("g")}
    assert {"main", "a<b>", "c&d", "e", "other"} <= set(names)
    # widths are final (not mid-animation): main holds 8 of 10 samples of the 1200 px graph
    width = float(names["main"].getElementsByTagName("rect")[0].getAttribute("width"))
    assert width == pytest.approx(1200 * 8 / 10, rel=1e-3)


@pytest.mark.skipif(flamegraphs.chromium() is None, reason="chromium renders the flame graph SVGs")
def test_an_svg_file_zooms_on_a_click(tmp_path):
    # The report's caption says "click a frame to zoom": the file itself does, without the page.
    folded = pd.Series([5, 3, 2], index=["main;a;c", "main;e", "other"])
    (svg_path,) = flamegraphs.write_svgs(tmp_path, {"oncpu": (folded, "on-CPU: test", "samples")})
    svg = svg_path.read_text().split("?>", 1)[1]
    probe = (
        "<!DOCTYPE html><html><body>" + svg + "<pre id='out'></pre><script>"
        "document.querySelector('g.frame[name=main]').dispatchEvent(new MouseEvent('click'));"
        "const got = {};"
        "for (const g of document.querySelectorAll('g.frame')) got[g.getAttribute('name')] ="
        " g.style.display === 'none' ? null : +g.querySelector('rect').getAttribute('width');"
        "document.getElementById('out').textContent = JSON.stringify(got);"
        "</script></body></html>"
    )
    page = tmp_path / "probe.html"
    page.write_text(probe)
    r = subprocess.run(
        [
            flamegraphs.chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path}/profile",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    got = json.loads(html.unescape(re.search(r"<pre id=\"out\">(.*?)</pre>", r.stdout, re.S).group(1)))
    # main (8 of 10 samples) fills the width, a and e share it 5:3, "other" is hidden, and the
    # frame below main (the graph's root) stays whole
    assert got["main"] == pytest.approx(1200) and got["other"] is None
    assert got["a"] == pytest.approx(750) and got["e"] == pytest.approx(450) and got["c"] == pytest.approx(750)
    assert got["on-CPU"] == pytest.approx(1200)


# --- Perfetto -------------------------------------------------------------------


def _ev(rows):
    cols = ["ts", "type", "cpu", "pid", "tid", "aux", "a0", "next_tid", "other_tid"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows]).astype({"type": "category"})


def ping_pong_events():
    # A (tid 1) writes, blocks in read; B (tid 2) is woken, reads, writes back, wakes A.
    return _ev(
        [
            (1000, "sys_enter", 0, 1, 1, 1, 0, 0, 0),
            (1500, "sys_exit", 0, 1, 1, 1, 1, 0, 0),
            (1400, "waking", 0, 2, 2, 1, 1, 0, 1),
            (1600, "sys_enter", 0, 1, 1, 0, 0, 0, 0),
            (1700, "switch", 0, 1, 1, 1, 0, 0, 0),
            (1800, "switch", 1, 9, 9, 0, 0, 2, 0),
            (2000, "sys_exit", 1, 2, 2, 0, 1, 0, 0),
            (2100, "sys_enter", 1, 2, 2, 1, 0, 0, 0),
            (2200, "waking", 1, 1, 1, 0, 2, 0, 2),
            (2300, "sys_exit", 1, 2, 2, 1, 1, 0, 0),
            (2500, "switch", 0, 9, 9, 0, 0, 1, 0),
            (2600, "sys_exit", 0, 1, 1, 0, 1, 0, 0),
        ]
    )


# workload.json of the ping-pong below: two threads, not pinned
PIPE = Workload.from_json(
    {
        "workload": "pipe",
        "metrics": ["rtt"],
        "threads": [
            {"role": "measuring", "pid": 1, "tid": 1, "cpu": -1},
            {"role": "peer", "pid": 2, "tid": 2, "cpu": -1},
        ],
    }
)


def test_perfetto_ping_pong_has_nested_slices_and_wakeup_flows():
    it = make_iterations([1700], metric="rtt")
    it["t_start_ns"], it["t_end_ns"], it["tid"] = 950, 2650, 1
    wl = PIPE
    ev = perfetto.build(it, ping_pong_events(), wl, tids=[1, 2])
    check_trace_events(ev)
    x = [e for e in ev if e["ph"] == "X"]
    # B's first sys_exit (2000) has no entry in the trace: no slice is made up for it.
    assert sorted((e["cat"], e["tid"]) for e in x) == [
        ("iteration", 1),
        ("sched", 1),
        ("sched", 1),
        ("syscall", 1),
        ("syscall", 1),
        ("syscall", 2),
    ]
    off = next(e for e in x if e["name"].startswith("off-CPU"))
    assert off["name"] == "off-CPU: blocked" and off["ts"] == pytest.approx(0.75) and off["dur"] == pytest.approx(0.8)
    # Inside it, A's wake-up: B's sched_waking at 2200 with no sched_wakeup after it (done at
    # once), A on CPU at 2500: 0.3 us in the run queue from 1.25 us, nothing being woken.
    queue = [(e["name"], e["ts"], e["dur"]) for e in x if e["cat"] == "sched" and e is not off]
    assert queue == [("run queue", pytest.approx(1.25), pytest.approx(0.3))]
    flows = sorted((e["ph"], e["tid"], e["ts"]) for e in ev if e["ph"] in "sf")
    # Origin 950 ns. A woke B at 1400 (0.45 us), B ran at 1800 (0.85 us);
    # B woke A at 2200 (1.25 us), A ran at 2500 (1.55 us).
    assert flows == [
        ("f", 1, pytest.approx(1.55)),
        ("f", 2, pytest.approx(0.85)),
        ("s", 1, pytest.approx(0.45)),
        ("s", 2, pytest.approx(1.25)),
    ]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"measuring 1", "peer 2"}
    # With the tasks' names the tracer recorded, the tracks carry them.
    ev = perfetto.build(it, ping_pong_events(), wl, tids=[1, 2], tasks=tasks_from_json({"1": {"comm": "ipcbench"}}))
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"measuring 1 (ipcbench)", "peer 2"}


def test_perfetto_splits_a_wake_up_into_being_woken_and_run_queue():
    it = make_iterations([1700], metric="rtt")
    it["t_start_ns"], it["t_end_ns"], it["tid"] = 950, 2650, 1
    wl = PIPE
    events = ping_pong_events()
    # A's wake-up finished on its CPU at 2350 (sched_wakeup): being woken 2200-2350, run queue 2350-2500.
    extra = events[events["ts"] == 2200].copy()
    extra["ts"], extra["type"] = 2350, "wakeup"
    events = pd.concat([events, extra]).sort_values("ts", kind="stable").reset_index(drop=True)
    ev = perfetto.build(it, events, wl, tids=[1, 2])
    check_trace_events(ev)
    got = sorted(
        (e["name"], e["ts"], e["dur"])
        for e in ev
        if e["ph"] == "X" and e["cat"] == "sched" and not e["name"].startswith("off-CPU")
    )
    assert got == [
        ("being woken (IPI, idle exit)", pytest.approx(1.25), pytest.approx(0.15)),
        ("run queue", pytest.approx(1.4), pytest.approx(0.15)),
    ]


def test_perfetto_draws_no_flow_from_a_task_a_hard_interrupt_hit():
    """B's wake-up of A at 2200 was taken in a hard interrupt on B's CPU (WAKE_IN_HARDIRQ):
    a timer woke A, not B, so no arrow leaves B."""
    it = make_iterations([1700], metric="rtt")
    it["t_start_ns"], it["t_end_ns"], it["tid"] = 950, 2650, 1
    wl = PIPE
    events = ping_pong_events()
    events.loc[events["ts"] == 2200, "aux"] = 0 | records.WAKE_IN_HARDIRQ
    ev = perfetto.build(it, events, wl, tids=[1, 2])
    check_trace_events(ev)
    flows = sorted((e["ph"], e["tid"]) for e in ev if e["ph"] in "sf")
    assert flows == [("f", 2), ("s", 1)]


# A's switch back in went unseen (this guest misses some): the tracer took none of A's records
# until A left the CPU again at 2400, and put [1700, 2400] in a lost span. A's read from 1600 then
# seems to return only at 2800, after its iteration ended.
MISSED_SWITCH_IN = [
    (1600, "sys_enter", 0, 1, 1, 0, 0, 0, 0),
    (1700, "switch", 0, 1, 1, 1, 0, 0, 0),
    (2400, "switch", 0, 1, 1, 1, 0, 0, 0),
    (2500, "switch", 0, 9, 9, 0, 0, 1, 0),
    (2800, "sys_exit", 0, 1, 1, 0, 1, 0, 0),
]


@pytest.mark.parametrize("lost", [[[1700, 2400, 0]], []])
def test_perfetto_leaves_out_slices_across_lost_records(lost):
    it = make_iterations([1700], metric="rtt")
    it["t_start_ns"], it["t_end_ns"], it["tid"] = 950, 2650, 1
    ev = perfetto.build(it, _ev(MISSED_SWITCH_IN), None, tids=[1], lost=lost)
    check_trace_events(ev)
    x = [e for e in ev if e["ph"] == "X"]
    assert not [e for e in x if e["cat"] == "syscall"]  # the read that seemed to last 1.2 us
    # off CPU from 2400 to 2500: it touches the span's end, which counts as overlapping
    assert [e["cat"] for e in x if e["tid"] == 1] == ["iteration"] + ([] if lost else ["sched"])
    gaps = [e for e in x if e["cat"] == "lost"]
    assert [(e["ts"], e["dur"]) for e in gaps] == ([(pytest.approx(0.75), pytest.approx(0.7))] if lost else [])
    track = [e["args"]["name"] for e in ev if e["ph"] == "M" and e["tid"] == perfetto.LOST_TID]
    assert track == [f"records lost by the tracer ({2 if lost else 1} syscall and off-CPU slices left out)"]


def test_perfetto_write_needs_a_traced_run(make_results):
    d = make_results("untraced", [1000, 2000, 3000])
    with pytest.raises(UsageError, match="not traced"):
        export.perfetto_json(d)


def test_perfetto_json_is_what_the_schema_says(tmp_path):
    it = make_iterations([1700])
    it["t_start_ns"], it["t_end_ns"], it["tid"] = 950, 2650, 1
    trace = {"traceEvents": perfetto.build(it, ping_pong_events(), None, tids=[1, 2]), "displayTimeUnit": "ns"}
    text = json.dumps(trace)
    back = json.loads(text)
    check_trace_events(back["traceEvents"])
    assert back["displayTimeUnit"] in ("ms", "ns")


def test_the_latency_heat_map_marks_the_blank_between_runs():
    """The untimed blank between two runs is labelled, not left to be guessed (point 10)."""
    import pandas as pd

    from analysis.model import heatmaps
    from analysis.render import plots

    it = pd.DataFrame(
        {
            "run": [0, 0, 1, 1],
            "metric": "rtt",
            "t_start_ns": [0, 1_000_000_000, 3_000_000_000, 4_000_000_000],
            "t_end_ns": [500_000, 1_000_500_000, 3_000_500_000, 4_000_500_000],
            "latency_ns": [500_000] * 4,
        }
    )
    grid = heatmaps.latency_heatmap(it, "rtt")
    assert grid.run_gaps == [(1.0005, 3.0, 1)]
    assert len(plots.latency_heatmap(grid, "h.png").png) > 0


@pytest.mark.parametrize("ns,text", [(64_938, "64.9 us"), (4_097_321, "4.10 ms"), (812, "812 ns"), (1.5e9, "1.50 s")])
def test_histogram_peaks_are_labelled_in_the_tables_units(ns, text):
    from analysis.render import plots

    assert plots._time_text(ns) == text


def test_the_sweep_plot_keeps_the_points_in_view_when_the_band_is_wide(monkeypatch):
    """Three sizes give a lopsided bootstrap band (to 110 000 ns over points near 10 000): the
    axis stays on the points and the line, and says the band is cut (point 10)."""
    import pandas as pd

    from analysis.render import plots

    seen = {}
    monkeypatch.setattr(plots, "_save", lambda fig, name, margins=None: seen.update(ax=fig.axes[0]) or name)
    pts = pd.DataFrame(
        {"size": [64.0, 8192.0, 32768.0], "median_ns": [9000.0, 10000.0, 12000.0], "ci_lo": [8900.0, 9900.0, 11800.0]}
    ).assign(ci_hi=lambda d: d["median_ns"] + 100)
    xs = np.linspace(0, 32768, 20)
    fit = {"band_x": xs, "fixed_ns": 9000.0, "ns_per_byte": 0.09, "band_lo": 8000 + 0 * xs, "band_hi": 9000 + 3 * xs}
    plots.sweep_fit(pts, fit, "s.png", "y", "x")
    lo, hi = seen["ax"].get_ylim()
    assert hi < 20_000 and any("band cut" in t.get_text() for t in seen["ax"].texts)
