#!/usr/bin/env python3
"""Medians and ratios of the `harness` benches (benches/harness.rs), read from criterion's
`target/criterion/harness_*/*/new/estimates.json` and the bench's own
`target/criterion/harness-stats/*.json`.

    python3 bench/medians.py                  # the last run
    python3 bench/medians.py --record R.jsonl # the last run, also appended to R.jsonl
    python3 bench/medians.py --summary R.jsonl  # medians over every recorded run

A ratio in a summary is the median of the per-run ratios (each run's two figures were
measured minutes apart on the same machine), not the ratio of the medians.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GROUPS = ("harness_delta", "harness_session", "harness_open")
TOKENS_PER_SESSION = 40_000
TURNS_PER_SESSION = 50

# (label, numerator, denominator)
RATIOS = (
    ("typed delta / raw append", "harness_delta/typed_delta_24b", "harness_delta/raw_log_append_57b"),
    ("session, step batch / floor 450", "harness_session/typed_step_batch",
     "harness_session/floor_450_write_fdatasync"),
    ("session, raw log / floor 450", "harness_session/raw_log_step_batch",
     "harness_session/floor_450_write_fdatasync"),
    ("session, step batch / raw log", "harness_session/typed_step_batch",
     "harness_session/raw_log_step_batch"),
    ("session, defaults / floor 650", "harness_session/typed_defaults",
     "harness_session/floor_650_write_fdatasync"),
    ("session, defaults / floor 450", "harness_session/typed_defaults",
     "harness_session/floor_450_write_fdatasync"),
    ("open: snapshot+1k / full replay 206k", "harness_open/snapshot_plus_1k",
     "harness_open/full_replay_206k"),
    ("open: snapshot+10k / snapshot+1k", "harness_open/snapshot_plus_10k",
     "harness_open/snapshot_plus_1k"),
    ("open: snapshot+100k / snapshot+1k", "harness_open/snapshot_plus_100k",
     "harness_open/snapshot_plus_1k"),
    ("open: snapshot+100k / full replay 305k", "harness_open/snapshot_plus_100k",
     "harness_open/full_replay_305k"),
)


def read_run(criterion_dir):
    """{bench: median ns per iteration} and {bench: stats} of the last run."""
    medians = {}
    for group in GROUPS:
        for estimates in sorted((criterion_dir / group).glob("*/new/estimates.json")):
            bench = f"{group}/{estimates.parent.parent.name}"
            medians[bench] = json.loads(estimates.read_text())["median"]["point_estimate"]
    stats = {}
    for path in sorted((criterion_dir / "harness-stats").glob("*.json")):
        entry = json.loads(path.read_text())
        stats[entry["bench"]] = entry
    return {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "medians": medians, "stats": stats}


def fmt_ns(bench, ns):
    if bench.startswith("harness_delta/"):
        return f"{ns:10.1f} ns"
    return f"{ns / 1e6:10.2f} ms"


def ratios(run):
    out = {}
    for label, top, bottom in RATIOS:
        m = run["medians"]
        if top in m and bottom in m:
            out[label] = m[top] / m[bottom]
    return out


def print_run(run):
    for bench, ns in sorted(run["medians"].items()):
        extra = ""
        if bench.startswith("harness_session/") and "floor" not in bench:
            extra = f"   {ns / TOKENS_PER_SESSION:7.0f} ns/token"
        print(f"{bench:45} {fmt_ns(bench, ns)}{extra}")
    for label, value in ratios(run).items():
        print(f"{label:45} {value:10.3f}x")
    for bench, s in sorted(run["stats"].items()):
        print(
            f"{bench}: paired with {s['paired_with'].split('/')[1]}, {s['sessions']} sessions: "
            f"median {s['median_store_ms']:.1f} ms vs {s['median_floor_ms']:.1f} ms, "
            f"median ratio {s['median_ratio']:.3f}; {s['frame_bytes'] / s['deltas']:.1f} "
            f"bytes/token; fdatasyncs {s['fdatasyncs']:.0f}/session "
            f"({s['fdatasyncs_by_appender']:.0f} appender + {s['fdatasyncs_by_flusher']:.0f} "
            f"flusher) = {s['fdatasyncs'] / s['turns']:.2f}/turn"
        )


def summary(runs):
    print(f"{len(runs)} runs: " + ", ".join(r["time"] for r in runs))
    benches = sorted({b for r in runs for b in r["medians"]})
    for bench in benches:
        values = [r["medians"][bench] for r in runs if bench in r["medians"]]
        med = statistics.median(values)
        spread = " ".join(fmt_ns(bench, v).strip() for v in values)
        extra = ""
        if bench.startswith("harness_session/") and "floor" not in bench:
            extra = f"  ({med / TOKENS_PER_SESSION:.0f} ns/token)"
        print(f"{bench:45} median {fmt_ns(bench, med).strip():>12}  runs: {spread}{extra}")
    labels = [label for label, _, _ in RATIOS]
    for label in labels:
        values = [ratios(r)[label] for r in runs if label in ratios(r)]
        if values:
            spread = " ".join(f"{v:.3f}" for v in values)
            print(f"{label:45} median {statistics.median(values):8.3f}x  runs: {spread}")
    stats_benches = sorted({b for r in runs for b in r["stats"]})
    for bench in stats_benches:
        entries = [r["stats"][bench] for r in runs if bench in r["stats"]]
        paired = [e["median_ratio"] for e in entries]
        syncs = [e["fdatasyncs"] for e in entries]
        flusher = [e["fdatasyncs_by_flusher"] for e in entries]
        e = entries[-1]
        print(
            f"{bench} paired with {e['paired_with'].split('/')[1]}: median of per-run paired "
            f"ratios {statistics.median(paired):.3f} (runs: {' '.join(f'{p:.3f}' for p in paired)}); "
            f"{e['frame_bytes'] / e['deltas']:.1f} bytes/token; fdatasyncs/session "
            f"{statistics.median(syncs):.0f} (flusher {statistics.median(flusher):.0f}) = "
            f"{statistics.median(syncs) / e['turns']:.2f}/turn"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--criterion-dir", type=Path, default=ROOT / "target" / "criterion")
    parser.add_argument("--record", type=Path, help="append the last run to this JSON-lines file")
    parser.add_argument("--summary", type=Path, help="medians over the runs recorded in this file")
    args = parser.parse_args()
    if args.summary:
        runs = [json.loads(line) for line in args.summary.read_text().splitlines() if line.strip()]
        if not runs:
            sys.exit(f"no runs in {args.summary}")
        summary(runs)
        return
    run = read_run(args.criterion_dir)
    if not run["medians"]:
        sys.exit(f"no harness bench results under {args.criterion_dir}")
    print_run(run)
    if args.record:
        with args.record.open("a") as f:
            f.write(json.dumps(run) + "\n")


if __name__ == "__main__":
    main()
