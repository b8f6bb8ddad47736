#!/usr/bin/env python3
"""Merges one point of bench/scale.sh: the PART lines (part-*.txt) and the holds (holds-*.txt,
"LOCK GRANT_NS RELEASE_NS" a line, CLOCK_MONOTONIC) of its processes into one RESULT line.

Fails (exit 1) if two holds of one lock overlap, in one process or across them, or if an
acquisition is missing. The handoff latency is a release to the next grant of the same lock,
whichever processes they were in. EXTRA (the server's counts) is appended as given. LABELS may
begin with backend=NAME (default: zookeeper, or redis for servers=redis); a figure that a process
did not count (Curator's requests and watch events) is "na".

    python3 bench/scale_merge.py waiters DIR "servers=1 processes=4 waiters=100 rounds=2" [EXTRA]
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
    """{lock: [(grant, release)]}, each list sorted."""
    out = {}
    for name in sorted(glob.glob(os.path.join(directory, "holds-*.txt"))):
        with open(name) as f:
            for line in f:
                lock, grant, release = line.split()
                out.setdefault(lock, []).append((int(grant), int(release)))
    for hs in out.values():
        hs.sort()
    return out


def rss_kb(p):
    return int(p.get("rss_kb", 0))


def waiting_task_bytes(ps):
    """The memory curve: what the resident set grew by while the tasks entered (each then waits
    in acquire, the gate held), per task, over the processes."""
    grown = sum(int(p["rss_kb_entered"]) - int(p["rss_kb_start"]) for p in ps)
    return grown * 1024 / sum(int(p["tasks"]) for p in ps)


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    rank = min(max(math.ceil(p / 100.0 * len(sorted_values)), 1), len(sorted_values))
    return sorted_values[rank - 1]


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: scale_merge.py CURVE DIR LABELS [EXTRA]")
    curve, directory, labels = sys.argv[1], sys.argv[2], sys.argv[3]
    extra = " " + sys.argv[4] if len(sys.argv) == 5 and sys.argv[4] else ""
    server = dict(kv.split("=", 1) for kv in extra.split())
    ps = parts(directory)
    if not ps:
        sys.exit(f"scale_merge: no PART line in {directory}")
    acquisitions = sum(int(p["acquisitions"]) for p in ps)
    by_lock = holds(directory)
    written = sum(len(hs) for hs in by_lock.values())
    timed = any(int(p.get("duration_ms", 0)) > 0 for p in ps)
    expected = sum(int(p["tasks"]) * int(p["rounds"]) for p in ps)
    if written != acquisitions or (not timed and acquisitions != expected):
        sys.exit(f"scale_merge: {acquisitions} acquisitions counted, {written} holds written"
                 + ("" if timed else f", {expected} expected"))
    handoffs = []
    first, last = None, None
    for lock, hs in by_lock.items():
        for (g1, r1), (g2, _) in zip(hs, hs[1:]):
            if g2 < r1:
                sys.exit(f"scale_merge: two holds of lock {lock} overlap: one granted at {g2} ns before the one "
                         f"before it (granted at {g1}) released at {r1}")
            handoffs.append((g2 - r1) / 1e3)
        first = hs[0][0] if first is None else min(first, hs[0][0])
        last = hs[-1][1] if last is None else max(last, hs[-1][1])
    handoffs.sort()
    span_s = (last - first) / 1e9 if acquisitions else 0.0
    shares = sorted(int(p["acquisitions"]) / acquisitions for p in ps) if acquisitions else [0.0]

    def per_acq(key, digits):
        """Per acquisition; "na" when a process did not count it (Curator: requests, watch events)."""
        if any(key not in p for p in ps):
            return "na"
        return f"{sum(float(p[key]) for p in ps) / acquisitions:.{digits}f}"

    # LABELS may begin with backend=NAME (bench/scale_curator.sh: backend=curator).
    if labels.split()[0].startswith("backend="):
        backend, labels = labels.split(None, 1)[0].split("=", 1)[1], labels.split(None, 1)[1]
    else:
        backend = "redis" if labels.split()[0] == "servers=redis" else "zookeeper"
    print(f"RESULT curve={curve} backend={backend} {labels} acquisitions={acquisitions} "
          f"requests_per_acq={per_acq('requests', 2)} watch_events_per_acq={per_acq('watch_events', 2)} "
          f"bytes_in_per_acq={per_acq('bytes_in', 0)} cpu_us_per_acq={per_acq('cpu_us', 1)} "
          f"p50_us={percentile(handoffs, 50):.1f} p99_us={percentile(handoffs, 99):.1f} "
          f"handoffs_per_s={acquisitions / span_s if span_s > 0 else 0.0:.1f} "
          f"share_min={shares[0]:.4f} share_max={shares[-1]:.4f} "
          f"rss_kb_per_process={max(rss_kb(p) for p in ps)}{extra}"
          + (f" server_commands_per_acq={int(server['server_commands']) / acquisitions:.2f}"
             if "server_commands" in server and acquisitions else "")
          + (f" server_packets_per_acq={int(server['server_packets']) / acquisitions:.2f}"
             if "server_packets" in server and acquisitions else "")
          + (f" bytes_per_waiting_task={waiting_task_bytes(ps):.0f}" if curve == "memory" else ""))


if __name__ == "__main__":
    main()
