#!/usr/bin/env python3
"""Markdown table of loom-bench JSON reports, for scripts/bench_serving.sh.

  bench_serving_table.py SYSTEM=report.json [SYSTEM=report.json ...]

One row per report: system, workload, rate (req/s), completed / sent, throughput (output
tok/s), TTFT p50/p90/p99 (ms), ITL p50/p90/p99 (ms), errors (by gRPC code) and dropped. Latencies are over completed requests only
(n/a when none completed).
"""
import json
import sys


def fmt_ms(x):
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def main(argv):
    head = ("| system | workload | rate (req/s) | completed / sent | output tok/s | "
            "TTFT p50 / p90 / p99 (ms) | ITL p50 / p90 / p99 (ms) | errors |")
    print(head)
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for item in argv[1:]:
        system, _, path = item.partition("=")
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            print(f"| {system} | ({path}: {e}) | | | | | | |")
            continue
        c = r["config"]
        t, i = r["ttft_ms"], r["itl_ms"]

        def pct(d):  # loom-bench summarizes completed requests only
            if not d.get("count"):
                return "n/a"
            return f"{fmt_ms(d['p50'])} / {fmt_ms(d['p90'])} / {fmt_ms(d['p99'])}"

        errs = ", ".join(f"{k} x{v}" for k, v in sorted(r.get("errors_by_code", {}).items()))
        extra = []
        if r.get("dropped"):
            extra.append(f"dropped {r['dropped']}")
        if r.get("unfinished"):
            extra.append(f"unfinished {r['unfinished']}")
        errors = "; ".join(x for x in [errs or str(r["errors"])] + extra if x)
        print(f"| {system} | {c['workload']} | {c['rate']:g} | {r['completed']} / {r['sent']} | "
              f"{r['throughput']['output_tokens_per_s']:.1f} | "
              f"{pct(t)} | {pct(i)} | {errors} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
