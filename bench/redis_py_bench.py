#!/usr/bin/python3
"""redis-py's Lock (Debian python3-redis 4.3.4) on the workloads of bench/run.sh's Redis section.

Run it with Debian's interpreter, /usr/bin/python3 (the package is installed for that one):

  /usr/bin/python3 bench/redis_py_bench.py --url redis://127.0.0.1:PORT
  /usr/bin/python3 bench/redis_py_bench.py --url redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...
                   (redis.cluster.RedisCluster; every seed node on loopback)

Workloads (letters as in bench/run.sh and issue 14):
  uncontended     a. one thread, one Lock: acquire + release, one at a time: p50/p99 per cycle.
  demo            b. --tasks threads on ONE Lock object (redis-py keeps the token per thread),
                     --per-task acquisitions each, decrementing a shared counter inside the lock;
                     the counter must reach 0 and no two threads may ever be inside at once.
  cross_process   c. --processes processes of this script on one key for --duration-ms, each
                     logging its holds; ops_per_s counts holder changes between processes
                     (handoffs), acquisitions_per_s every acquisition.
  many_locks      d. --keys locks, --many-tasks threads, each cycle on a uniformly random key,
                     for --duration-ms.

redis-py waits by polling: a blocked acquire retries SET NX every --sleep seconds (redis-py's
default 0.1 s, kept here as it is what users get).

Other modes:
  --participant   one process of workload c (this script starts them itself).
  --summarize     reads hold logs (<id> <mode> <enter_ns> <exit_ns>, CLOCK_MONOTONIC ns) of one
                  implementation's workload c and prints its RESULT line: bench/run.sh uses it for
                  every implementation, so that c is counted alike for all.

Every loop is bounded in count and by --time-limit; a watchdog ends the process (status 3) 15 s
after it. Prints RESULT lines in the format of the other benchmarks.
"""

import argparse
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

PROGRAM = "redis_py_bench.py"


class BenchError(Exception):
    pass


def fail(msg):
    raise BenchError(msg)


def percentile_us(ns, p):
    """Nearest-rank percentile of a list of nanosecond latencies, in microseconds."""
    if not ns:
        return 0.0
    s = sorted(ns)
    rank = min(max(int(math.ceil(p / 100.0 * len(s))), 1), len(s))
    return s[rank - 1] / 1e3


def mean_us(ns):
    return (sum(ns) / len(ns) / 1e3) if ns else 0.0


def result(impl, workload, ops, seconds, lat_ns, cpu_s, extra=""):
    per_s = ops / seconds if seconds > 0 else 0.0
    cpu_per_op = cpu_s * 1e6 / ops if ops > 0 else 0.0
    print(f"RESULT impl={impl} workload={workload} ops_per_s={per_s:.1f} p50_us={percentile_us(lat_ns, 50):.1f} "
          f"p99_us={percentile_us(lat_ns, 99):.1f} mean_us={mean_us(lat_ns):.1f} cpu_us_per_op={cpu_per_op:.1f}"
          f"{extra}", flush=True)


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()

    def check(self, what):
        if self.left() <= 0:
            fail(f"time limit exceeded while {what}")


def start_watchdog(seconds):
    def bite():
        sys.stderr.write(f"{PROGRAM}: hard time limit exceeded, aborting\n")
        sys.stderr.flush()
        os._exit(3)
    t = threading.Timer(seconds, bite)
    t.daemon = True
    t.start()


def is_loopback(host):
    """localhost or a literal loopback address (127.0.0.0/8, ::1)."""
    import ipaddress
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


CLUSTER_SCHEME = "redis+cluster://"


def cluster_seeds(url):
    """The (host, port) seed nodes of redis+cluster://HOST:PORT[,HOST:PORT...] (no user info)."""
    hosts = url[len(CLUSTER_SCHEME):].split("/")[0]
    seeds = []
    for h in hosts.split(","):
        host, _, port = h.rpartition(":")
        if "@" in h or not host or not port.isdigit():
            fail(f"--url: expected {CLUSTER_SCHEME}HOST:PORT[,HOST:PORT...], got {url!r}")
        seeds.append((host.strip("[]"), int(port)))
    return seeds


def check_loopback(url):
    import urllib.parse
    if url.lower().startswith(CLUSTER_SCHEME):
        for host, _ in cluster_seeds(url):
            if not is_loopback(host):
                fail(f"--url: seed node {host!r} of {url!r} is not on loopback "
                     "(this benchmark runs against local servers only)")
        return
    u = urllib.parse.urlparse(url)
    if u.scheme != "redis":
        fail(f"--url: expected redis://[password@]HOST:PORT[/db] or {CLUSTER_SCHEME}HOST:PORT[,...], got {url!r}")
    if not is_loopback(u.hostname or ""):
        fail(f"--url: {url!r} is not on loopback (this benchmark runs against a local server only)")


def connect(url):
    import redis
    if url.lower().startswith(CLUSTER_SCHEME):
        # redis-py's RedisCluster: each lock's key routed to its slot's master.
        from redis.cluster import ClusterNode, RedisCluster
        nodes = [ClusterNode(h, p) for h, p in cluster_seeds(url)]
        r = RedisCluster(startup_nodes=nodes, socket_timeout=10, socket_connect_timeout=5)
    else:
        r = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
    if not r.ping():
        fail("PING failed")
    return r


def acquire_bounded(lock, deadline, what):
    left = deadline.left()
    if left <= 0 or not lock.acquire(blocking=True, blocking_timeout=left):
        fail(f"{what}: acquire timed out (time limit)")


# ---------------------------------------------------------------------------------------------
# a. uncontended

def run_threads(task, n, start, deadline, errors, what):
    """Runs task(0..n-1) on n threads that meet at the barrier `start` (n + 1 parties, this
    thread the last), joins them by the deadline, fails on a thread still running or an error,
    and returns (wall seconds, CPU seconds) from the start."""
    threads = [threading.Thread(target=task, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    cpu0 = time.process_time()
    t0 = time.perf_counter_ns()
    start.wait(timeout=30)
    for t in threads:
        t.join(timeout=max(deadline.left(), 0.1))
    seconds = (time.perf_counter_ns() - t0) / 1e9
    cpu = time.process_time() - cpu0
    if any(t.is_alive() for t in threads):
        fail(f"{what}: threads still running at the time limit")
    if errors:
        fail(f"{what}: " + "; ".join(errors[:3]))
    return seconds, cpu


def uncontended(r, o, deadline, prefix):
    lock = r.lock(prefix + "a", timeout=o.ttl_ms / 1000.0, sleep=o.sleep)
    for _ in range(o.warmup):
        deadline.check("warming up")
        acquire_bounded(lock, deadline, "uncontended")
        lock.release()
    lat = []
    cpu0 = time.process_time()
    t0 = time.perf_counter_ns()
    for i in range(o.cycles):
        if (i & 255) == 0:
            deadline.check("running uncontended")
        c0 = time.perf_counter_ns()
        acquire_bounded(lock, deadline, "uncontended")
        lock.release()
        lat.append(time.perf_counter_ns() - c0)
    seconds = (time.perf_counter_ns() - t0) / 1e9
    cpu = time.process_time() - cpu0
    print(f"uncontended: {o.cycles} cycles, p50 {percentile_us(lat, 50):.1f} us, "
          f"p99 {percentile_us(lat, 99):.1f} us")
    result("redis_py", "uncontended", o.cycles, seconds, lat, cpu, " requests_per_op=2")


# ---------------------------------------------------------------------------------------------
# b. the demo: threads on one Lock object

def demo(r, o, deadline, prefix):
    lock = r.lock(prefix + "b", timeout=o.ttl_ms / 1000.0, sleep=o.sleep)  # thread_local token
    total = o.tasks * o.per_task
    state = {"counter": total, "inside": 0, "max_inside": 0}
    waits = [[] for _ in range(o.tasks)]
    errors = []
    start = threading.Barrier(o.tasks + 1)

    def task(n):
        try:
            start.wait(timeout=30)
            for _ in range(o.per_task):
                w0 = time.perf_counter_ns()
                acquire_bounded(lock, deadline, "demo")
                waits[n].append(time.perf_counter_ns() - w0)
                try:
                    state["inside"] += 1
                    state["max_inside"] = max(state["max_inside"], state["inside"])
                    v = state["counter"]
                    time.sleep(0)  # yield to the other threads while inside
                    state["counter"] = v - 1
                    state["inside"] -= 1
                finally:
                    lock.release()
        except Exception as e:  # reported by the main thread
            errors.append(f"task {n}: {e!r}")

    seconds, cpu = run_threads(task, o.tasks, start, deadline, errors, "demo")
    lat = [w for ws in waits for w in ws]
    print(f"demo: {o.tasks} threads x {o.per_task}: counter {total} -> {state['counter']}, "
          f"most inside at once {state['max_inside']}, {seconds:.2f} s")
    if state["counter"] != 0 or state["max_inside"] != 1:
        fail(f"demo: exclusion broken (counter {state['counter']}, {state['max_inside']} inside at once)")
    result("redis_py", "demo", total, seconds, lat, cpu, f" tasks={o.tasks} per_task={o.per_task} counter_ok=1")


# ---------------------------------------------------------------------------------------------
# c. processes on one key

def participant(o):
    """One process of workload c: holds --key in a loop from --start-at-ms (wall clock) for
    --duration-ms and writes its holds to --log."""
    r = connect(o.url)
    lock = r.lock(o.key, timeout=o.ttl_ms / 1000.0, sleep=o.sleep)
    deadline = Deadline(o.time_limit)
    wait_s = o.start_at_ms / 1000.0 - time.time()  # wall clock, as bench/run.sh's `date +%s%3N`
    if wait_s > 60:
        fail(f"--start-at-ms is {wait_s:.0f} s away")
    if wait_s > 0:
        time.sleep(wait_s)
    end = time.monotonic_ns() + o.duration_ms * 1_000_000
    lines = []
    count = 0
    while count < o.max_count and time.monotonic_ns() < end:
        deadline.check("running cross_process")
        left = min(deadline.left(), (end - time.monotonic_ns()) / 1e9)
        if left <= 0 or not lock.acquire(blocking=True, blocking_timeout=left):
            break  # the run ended while waiting
        enter = time.monotonic_ns()
        if o.hold_ms > 0:
            time.sleep(o.hold_ms / 1000.0)
        exit_ = time.monotonic_ns()
        lock.release()
        lines.append(f"{o.id} X {enter} {exit_}\n")
        count += 1
    with open(o.log, "w") as f:
        f.writelines(lines)
    print(f"PART impl=redis_py workload=cross_process id={o.id} ops={count}", flush=True)


def summarize(impl, files):
    """The RESULT line of workload c from the hold logs of all its processes."""
    holds = []
    for path in files:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                parts = line.split()
                if not parts or parts[0].startswith("#"):
                    continue
                if len(parts) != 4:
                    fail(f"{path}:{n}: expected '<id> <mode> <enter_ns> <exit_ns>'")
                holds.append((int(parts[2]), int(parts[3]), parts[0]))
    if not holds:
        fail(f"cross_process ({impl}): no holds logged")
    holds.sort()
    handoffs = sum(1 for i in range(1, len(holds)) if holds[i][2] != holds[i - 1][2])
    seconds = (max(h[1] for h in holds) - holds[0][0]) / 1e9
    per_id = {}
    for h in holds:
        per_id[h[2]] = per_id.get(h[2], 0) + 1
    # A process that never held logs nothing: count the files as the processes.
    fewest = min(per_id.values()) if len(per_id) == len(files) else 0
    # Latency: the gap from one hold's exit to the next hold's entry by another process.
    gaps = [holds[i][0] - holds[i - 1][1] for i in range(1, len(holds)) if holds[i][2] != holds[i - 1][2]]
    acq_per_s = len(holds) / seconds if seconds > 0 else 0.0
    result(impl, "cross_process", handoffs, seconds, gaps, 0.0,
           f" processes={len(files)} acquisitions={len(holds)} acquisitions_per_s={acq_per_s:.1f}"
           f" min_per_process={fewest}")


def cross_process(o, deadline, prefix):
    key = prefix + "c"
    logdir = o.log_dir or tempfile.mkdtemp(prefix="redis-py-bench-")
    start_at = int(time.time() * 1000) + 1500  # Python starts in ~0.1 s; margin for a busy machine
    procs = []
    logs = []
    for i in range(1, o.processes + 1):
        log = os.path.join(logdir, f"redis_py-p{i}.log")
        logs.append(log)
        cmd = [sys.executable, os.path.abspath(__file__), "--participant", "--url", o.url, "--key", key,
               "--id", f"p{i}", "--log", log, "--start-at-ms", str(start_at), "--duration-ms", str(o.duration_ms),
               "--hold-ms", str(o.hold_ms), "--sleep", str(o.sleep), "--ttl-ms", str(o.ttl_ms),
               "--time-limit", str(max(int(deadline.left()), 1))]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    rc = 0
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(deadline.left(), 1) + 20)
        except subprocess.TimeoutExpired:
            p.kill()  # our own child, by its Popen handle
            out, _ = p.communicate()
            rc = rc or 124
        sys.stdout.write(out)
        rc = rc or p.returncode
    if rc != 0:
        fail(f"cross_process: a participant failed (status {rc})")
    summarize("redis_py", logs)
    if o.log_dir:
        print(f"cross_process: hold logs in {logdir}")
    else:
        for log in logs:
            os.unlink(log)
        os.rmdir(logdir)


# ---------------------------------------------------------------------------------------------
# d. many keys

def many_locks(r, o, deadline, prefix):
    locks = [r.lock(f"{prefix}d{k}", timeout=o.ttl_ms / 1000.0, sleep=o.sleep) for k in range(o.keys)]
    end = time.monotonic() + o.duration_ms / 1000.0
    lats = [[] for _ in range(o.many_tasks)]
    errors = []
    start = threading.Barrier(o.many_tasks + 1)

    def task(n):
        try:
            rng = random.Random(n)
            start.wait(timeout=30)
            while time.monotonic() < end:
                deadline.check("running many_locks")
                lock = locks[rng.randrange(o.keys)]
                c0 = time.perf_counter_ns()
                acquire_bounded(lock, deadline, "many_locks")
                lock.release()
                lats[n].append(time.perf_counter_ns() - c0)
        except Exception as e:
            errors.append(f"task {n}: {e!r}")

    seconds, cpu = run_threads(task, o.many_tasks, start, deadline, errors, "many_locks")
    lat = [x for xs in lats for x in xs]
    print(f"many_locks: {o.keys} keys, {o.many_tasks} threads: {len(lat)} cycles in {seconds:.2f} s")
    result("redis_py", "many_locks", len(lat), seconds, lat, cpu, f" keys={o.keys} tasks={o.many_tasks}")


# ---------------------------------------------------------------------------------------------

WORKLOADS = ["uncontended", "demo", "cross_process", "many_locks"]


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROGRAM, description="redis-py's Lock on the Redis workloads a, b, c, d")

    def positive(lo, hi):
        def conv(s):
            v = int(s, 10)
            if not lo <= v <= hi:
                raise argparse.ArgumentTypeError(f"expected {lo} to {hi}, got {s}")
            return v
        return conv

    p.add_argument("--url", default=os.environ.get("ZKCORO_TEST_REDIS") or "redis://127.0.0.1:6379",
                   help="loopback server (default: $ZKCORO_TEST_REDIS, else redis://127.0.0.1:6379)")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated (default: all)")
    p.add_argument("--cycles", type=positive(1, 10_000_000), default=5000, help="a: cycles measured")
    p.add_argument("--warmup", type=positive(0, 10_000_000), default=500, help="a: cycles before measuring")
    p.add_argument("--tasks", type=positive(1, 10_000), default=100, help="b: threads")
    p.add_argument("--per-task", type=positive(1, 1_000_000), default=5, help="b: acquisitions per thread")
    p.add_argument("--processes", type=positive(1, 64), default=4, help="c: processes")
    p.add_argument("--hold-ms", type=positive(0, 60_000), default=0, help="c: time held per acquisition")
    p.add_argument("--duration-ms", type=positive(10, 600_000), default=5000, help="c, d: run time")
    p.add_argument("--keys", type=positive(1, 1_000_000), default=1000, help="d: keys")
    p.add_argument("--many-tasks", type=positive(1, 10_000), default=50, help="d: threads")
    p.add_argument("--ttl-ms", type=positive(1, 86_400_000), default=10_000, help="the Lock's timeout")
    p.add_argument("--sleep", type=float, default=0.1, help="redis-py's retry sleep (default 0.1 s, its own)")
    p.add_argument("--time-limit", type=positive(1, 86_400), default=300, help="whole run, seconds")
    p.add_argument("--log-dir", default="", help="c: keep the hold logs in this directory")
    # Modes used by bench/run.sh and by this script itself.
    p.add_argument("--participant", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--key", default="", help=argparse.SUPPRESS)
    p.add_argument("--id", default="p1", help=argparse.SUPPRESS)
    p.add_argument("--log", default="", help=argparse.SUPPRESS)
    p.add_argument("--start-at-ms", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--max-count", type=positive(1, 100_000_000), default=10_000_000, help=argparse.SUPPRESS)
    p.add_argument("--summarize", metavar="IMPL", default="",
                   help="print the RESULT line of workload c for IMPL from the hold logs given as arguments")
    p.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    o = p.parse_args(argv)
    o.workload_list = [w for w in o.workloads.split(",") if w]
    for w in o.workload_list:
        if w not in WORKLOADS:
            p.error(f"--workloads: unknown workload {w!r}")
    if o.sleep <= 0 or o.sleep > 10:
        p.error("--sleep: expected 0 < SECONDS <= 10")
    if o.participant and (not o.key or not o.log):
        p.error("--participant needs --key and --log")
    return o


def main(argv):
    try:
        o = parse_args(argv)
        start_watchdog(o.time_limit + 15)
        if o.summarize:
            summarize(o.summarize, o.files)
            return 0
        check_loopback(o.url)
        if o.participant:
            participant(o)
            return 0
        import redis
        r = connect(o.url)
        deadline = Deadline(o.time_limit)
        prefix = f"zkbench:py:{os.getpid()}:"
        print(f"{PROGRAM}: redis-py {redis.__version__}, server {o.url}, sleep {o.sleep} s, "
              f"timeout {o.ttl_ms} ms", flush=True)
        for w in o.workload_list:
            if w == "uncontended":
                uncontended(r, o, deadline, prefix)
            elif w == "demo":
                demo(r, o, deadline, prefix)
            elif w == "cross_process":
                cross_process(o, deadline, prefix)
            else:
                many_locks(r, o, deadline, prefix)
        return 0
    except BenchError as e:
        sys.stderr.write(f"{PROGRAM}: {e}\n")
        return 1
    except ImportError as e:
        sys.stderr.write(f"{PROGRAM}: {e} (install the Debian package python3-redis and run /usr/bin/python3)\n")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
