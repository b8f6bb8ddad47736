#!/usr/bin/python3
"""A redis-py Lock holder for the Redis interop test (tests/interop/interop_redis.sh).

  /usr/bin/python3 redis_py_holder.py --url redis://127.0.0.1:PORT --key KEY --holds N --hold-ms M \
      --id ID --log FILE

Loops N times: acquire redis-py's Lock on KEY (blocking, bounded by the time left), log the entry
time, hold M ms, log the exit time, release. Each hold becomes one line of FILE,
"<id> X <enter_ns> <exit_ns>" in CLOCK_MONOTONIC ns (time.monotonic_ns(), the clock of C++'s
std::chrono::steady_clock), the format of tests/interop/interval_checker.hpp; lines are appended
and flushed one by one. Prints acquired=<count> at the end. URLs: redis://, redis+sentinel://HOSTS/MASTER
(redis.sentinel) and redis+cluster://HOST:PORT[,HOST:PORT...] (redis.cluster.RedisCluster; the
cluster test, tests/redis/test_redis_cluster.cpp, runs it so).

Exit 0 when all N holds happened; 1 when the time limit ended the loop first, or a release found
the lock no longer ours (its TTL passed during the hold); 2 on bad usage or a missing redis-py.
Run it with Debian's /usr/bin/python3 (python3-redis is installed for that interpreter).
"""

import argparse
import os
import sys
import threading
import time


def main(argv):
    p = argparse.ArgumentParser(prog="redis_py_holder.py", description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--holds", type=int, required=True, help="number of holds (1 to 1000000)")
    p.add_argument("--hold-ms", type=int, required=True, help="time held each time (0 to 60000)")
    p.add_argument("--id", required=True, help="the holder's name in the log (no whitespace)")
    p.add_argument("--log", required=True)
    p.add_argument("--ttl-ms", type=int, default=10000, help="the Lock's timeout (default 10000)")
    p.add_argument("--sleep", type=float, default=0.1,
                   help="redis-py's retry sleep while blocked (default 0.1 s, its own default)")
    p.add_argument("--time-limit", type=float, default=120, help="seconds for the whole run (default 120)")
    p.add_argument("--gap-ms", type=int, default=0,
                   help="pause after each release before acquiring again (default 0: at once)")
    o = p.parse_args(argv)
    if not 1 <= o.holds <= 1_000_000 or not 0 <= o.hold_ms <= 60_000:
        p.error("--holds must be in [1, 1000000] and --hold-ms in [0, 60000]")
    if not o.id or any(c.isspace() for c in o.id):
        p.error("--id must be non-empty, without whitespace")
    if o.ttl_ms <= o.hold_ms or o.time_limit <= 0 or not 0 < o.sleep <= 10 or not 0 <= o.gap_ms <= 60_000:
        p.error("need --ttl-ms > --hold-ms, --time-limit > 0, 0 < --sleep <= 10 and 0 <= --gap-ms <= 60000")

    try:
        import redis
        from redis.exceptions import LockError
    except ImportError as e:
        sys.stderr.write(f"redis_py_holder.py: {e} (install python3-redis; run /usr/bin/python3)\n")
        return 2

    # A last resort against a wait that nothing else bounds (a hung connection).
    def bite():
        sys.stderr.write(f"redis_py_holder.py {o.id}: hard time limit exceeded, aborting\n")
        sys.stderr.flush()
        os._exit(3)
    dog = threading.Timer(o.time_limit + 15, bite)
    dog.daemon = True
    dog.start()

    end = time.monotonic() + o.time_limit
    if o.url.lower().startswith("redis+sentinel://"):
        # redis+sentinel://host:port[,host:port...]/MASTER: the master as redis.sentinel finds it.
        from redis.sentinel import Sentinel
        hosts, _, name = o.url[len("redis+sentinel://"):].partition("/")
        addrs = [(h.rpartition(":")[0], int(h.rpartition(":")[2])) for h in hosts.split(",")]
        r = Sentinel(addrs, socket_timeout=10).master_for(name.split("/")[0], socket_timeout=10)
    elif o.url.lower().startswith("redis+cluster://"):
        # redis+cluster://host:port[,host:port...]: redis-py's RedisCluster (its Lock's key is
        # the name as given: a name with braces, {name}, is on the slot of zkcoro's lock there).
        from redis.cluster import ClusterNode, RedisCluster
        hosts = o.url[len("redis+cluster://"):].split("/")[0]
        nodes = [ClusterNode(h.rpartition(":")[0], int(h.rpartition(":")[2])) for h in hosts.split(",")]
        r = RedisCluster(startup_nodes=nodes, socket_timeout=10, socket_connect_timeout=5)
    else:
        r = redis.Redis.from_url(o.url, socket_timeout=10, socket_connect_timeout=5)
    lock = r.lock(o.key, timeout=o.ttl_ms / 1000.0, sleep=o.sleep)
    acquired = 0
    status = 0
    with open(o.log, "a") as log:
        while acquired < o.holds:
            left = end - time.monotonic()
            if left <= 0 or not lock.acquire(blocking=True, blocking_timeout=left):
                sys.stderr.write(f"{o.id}: time limit reached after {acquired} of {o.holds} holds\n")
                status = 1
                break
            enter = time.monotonic_ns()
            if o.hold_ms > 0:
                time.sleep(o.hold_ms / 1000.0)
            exit_ = time.monotonic_ns()
            log.write(f"{o.id} X {enter} {exit_}\n")
            log.flush()
            acquired += 1
            try:
                lock.release()
            except LockError as e:  # LockNotOwnedError: the key expired or another token holds it
                sys.stderr.write(f"{o.id}: release failed, the lock was no longer ours: {e}\n")
                status = 1
                break
            if o.gap_ms > 0:
                time.sleep(o.gap_ms / 1000.0)
    print(f"acquired={acquired}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
