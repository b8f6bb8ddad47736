#!/usr/bin/env python3
"""Merges one point of bench/scale.sh: the PART lines (part-*.txt) and the holds (holds-*.txt,
"GRANT_NS RELEASE_NS" a line, CLOCK_MONOTONIC) of its processes into one RESULT line.

Fails (exit 1) if two holds overlap, in one process or across them, or if an acquisition is
missing. The handoff latency is a release to the next grant, whichever processes they were in.

    python3 bench/scale_merge.py DIR "servers=1 processes=4 waiters=100 rounds=2"
"""
import glob
import math
import os
import sys


def parts(directory):
    out = []
    for name in sorted(glob.glob(os.path.join(directory, "part-*.txt"))):
        with open(name) as f:
            for line in f:
                if line.startswith("PART "):
                    out.append(dict(kv.split("=", 1) for kv in line.split()[1:]))
    return out


def holds(directory):
    out = []
    for name in sorted(glob.glob(os.path.join(directory, "holds-*.txt"))):
        with open(name) as f:
            for line in f:
                grant, release = line.split()
                out.append((int(grant), int(release)))
    out.sort()
    return out


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    rank = min(max(math.ceil(p / 100.0 * len(sorted_values)), 1), len(sorted_values))
    return sorted_values[rank - 1]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: scale_merge.py DIR LABELS")
    directory, labels = sys.argv[1], sys.argv[2]
    ps = parts(directory)
    hs = holds(directory)
    if not ps:
        sys.exit(f"scale_merge: no PART line in {directory}")
    acquisitions = sum(int(p["acquisitions"]) for p in ps)
    expected = sum(int(p["tasks"]) * int(p["rounds"]) for p in ps)
    if acquisitions != expected or len(hs) != acquisitions:
        sys.exit(f"scale_merge: {acquisitions} acquisitions counted, {len(hs)} holds written, {expected} expected")
    handoffs = []
    for (g1, r1), (g2, _) in zip(hs, hs[1:]):
        if g2 < r1:
            sys.exit(f"scale_merge: two holds overlap: one granted at {g2} ns before the one before it "
                     f"(granted at {g1}) released at {r1}")
        handoffs.append((g2 - r1) / 1e3)
    handoffs.sort()
    span_s = (hs[-1][1] - hs[0][0]) / 1e9 if hs else 0.0

    def per_acq(key):
        return sum(float(p[key]) for p in ps) / acquisitions

    print(f"RESULT curve=waiters backend=zookeeper {labels} acquisitions={acquisitions} "
          f"requests_per_acq={per_acq('requests'):.2f} watch_events_per_acq={per_acq('watch_events'):.2f} "
          f"bytes_in_per_acq={per_acq('bytes_in'):.0f} cpu_us_per_acq={per_acq('cpu_us'):.1f} "
          f"p50_us={percentile(handoffs, 50):.1f} p99_us={percentile(handoffs, 99):.1f} "
          f"handoffs_per_s={(len(hs) - 1) / span_s if span_s > 0 else 0.0:.1f}")


if __name__ == "__main__":
    main()
