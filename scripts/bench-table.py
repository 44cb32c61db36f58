#!/usr/bin/env python3
"""Prints BENCHMARKS.md's tables from scripts/bench.sh's results.jsonl."""
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "target/bench-run/results.jsonl"
rows = {}
for line in open(path):
    r = json.loads(line)
    rows.setdefault(r["label"], []).append(r["report"])


def first(label):
    return rows.get(label, [None])[0]


print("| list (RV=0) | clients | apiserver (sim) | kubeplex | nginx (static file) | kubeplex vs sim | kubeplex vs nginx |")
print("|---|---|---|---|---|---|---|")
for enc in ["json", "pb"]:
    for c in [1, 8]:
        a, k, n = (first(f"list-{enc}-c{c}-{t}") for t in ["apiserver", "kubeplex", "nginx"])
        if not (a and k):
            continue
        fmt = lambda r: f"{r['lists_per_second']:.1f}/s, p50 {r['latency']['p50_ms']:.0f} ms, {r['mib_per_second']:.0f} MiB/s" if r else "—"
        vs_n = f"{k['lists_per_second'] / n['lists_per_second']:.2f}×" if n else "—"
        size = k["bytes_per_list"] / 1e6
        print(f"| {'JSON' if enc == 'json' else 'protobuf'} ({size:.1f} MB) | {c} | {fmt(a)} | {fmt(k)} | {fmt(n)} | {k['lists_per_second'] / a['lists_per_second']:.2f}× | {vs_n} |")
for label in ["list-gzip-c8-kubeplex", "list-node-c8-kubeplex", "list-node-c8-apiserver"]:
    r = first(label)
    if r:
        print(f"| {label} | {r['clients']} | | {r['lists_per_second']:.1f}/s, p50 {r['latency']['p50_ms']:.1f} ms, {r['bytes_per_list']} B/list | | | |")
print()
print("| watch | watchers | events delivered | lost | p50 | p99 | max | CPU target / bench | target RSS idle → with watchers | per watcher |")
print("|---|---|---|---|---|---|---|---|---|---|")
for label, reports in rows.items():
    if not label.startswith(("watch", "idle")):
        continue
    r = reports[0]
    rss = ""
    if r.get("rss_before_bytes"):
        rss = f"{r['rss_before_bytes'] / 2**20:.0f} → {r['rss_watching_bytes'] / 2**20:.0f} MiB"
    per = f"{r['rss_per_watcher_bytes'] / 1024:.1f} KiB" if r.get("rss_per_watcher_bytes") is not None else ""
    cpu = ""
    if r.get("target_cpu_seconds") is not None:
        kernel = r.get("target_system_cpu_seconds")
        kernel = f" (kernel {kernel:.1f} s)" if kernel is not None else ""
        cpu = f"{r['target_cpu_seconds']:.1f} s{kernel} / {r['bench_cpu_seconds']:.1f} s in {r['seconds']:.0f} s"
    print(f"| {label} | {r['watchers']} | {r['events_received']}/{r['events_expected']} at {r['write_rate']:.0f}/s | {r['events_lost']} | {r['latency']['p50_ms']:.1f} ms | {r['latency']['p99_ms']:.1f} ms | {r['latency']['max_ms']:.1f} ms | {cpu} | {rss} | {per} |")
    if len(reports) > 1:
        print(f"|  upstream calls during {label} | {reports[1]['calls']} |")
print()
for label in ["upstream-calls-kubeplex", "upstream-calls-apiserver"]:
    reports = rows.get(label)
    if reports:
        print(f"- {label}: {reports[-1]['calls']}")

# The client mix: what reached the upstream directly and through kubeplex.
mix = [(t, first(f"mix-{t}")) for t in ["apiserver", "kubeplex"]]
if any(r for _, r in mix):
    print()
    print("| client mix | client LIST + WATCH | upstream pods | services | endpointslices | configmaps | upstream LIST + WATCH | offload |")
    print("|---|---|---|---|---|---|---|---|")
    for t, r in mix:
        if not r:
            continue
        lw = lambda res: f"{r['upstream'].get(res, {}).get('LIST', 0)} + {r['upstream'].get(res, {}).get('WATCH', 0)}"
        ratio = f"{r['offload_ratio']:.1f}×" if r["offload_ratio"] else "∞"
        print(f"| {'directly' if t == 'apiserver' else 'through kubeplex'} | {r['client_lists']} + {r['client_watches']} | {lw('pods')} | {lw('services')} | {lw('endpointslices')} | {lw('configmaps')} | {r['upstream_lists']} + {r['upstream_watches']} | {ratio} |")
    k = first("mix-kubeplex")
    if k and k.get("proxy_calls"):
        print()
        print("kubeplex's own upstream calls and passthroughs: " + ", ".join(f"{n} {key}" for key, n in k["proxy_calls"].items()))
