// CuratorBench: the lock workloads of zkcoro's benchmarks, run with Apache Curator's recipes
// (InterProcessMutex, InterProcessReadWriteLock) against a loopback ZooKeeper server, so that
// both implementations can be compared on the same server.
//
//   bench/curator/build.sh OUTDIR
//   java -cp "$(cat OUTDIR/classpath.txt)" CuratorBench --workload NAME [--connect HOST:PORT]
//        [--cycles N] [--warmup N] [--tasks T] [--per-task K] [--duration-ms D] [--paths P]
//        [--path /zkcoro-bench/x] [--start-at-ms EPOCH_MS] [--time-limit SECONDS] [--id NAME]
//        [--hold-ms H]
//
// Workloads (the definitions are shared with the C++ benchmark; see usage() for the options):
//   uncontended      one thread, one InterProcessMutex: --warmup unmeasured cycles, then --cycles
//                    measured acquire+release cycles; p50/p99/mean per cycle.
//   demo_shared      --tasks threads share ONE InterProcessMutex, --per-task acquisitions each;
//                    inside the lock a plain shared counter is read, Thread.yield(), written back
//                    (decremented). Checks: counter 0, never two inside, every acquisition made.
//                    p50/p99 = wait from the acquire() call to the grant.
//   demo_per_thread  the same with one InterProcessMutex object per thread (same path).
//   cross_process    one thread on --path (shared with other processes), from wall clock
//                    --start-at-ms for --duration-ms; prints a PART line for a script to sum.
//                    With --hold-ms H each hold lasts H ms, and the PART line's p50/p99 are
//                    of the wait for the lock (acquire only); else of acquire+release.
//   many_locks       --paths lock paths, one InterProcessMutex each shared by --tasks threads;
//                    each cycle picks a random path; for --duration-ms. p50/p99 per cycle.
//   read_write       one InterProcessReadWriteLock, 8 reader and 2 writer threads, for
//                    --duration-ms; exclusion checked inside. p50/p99 per acquire+release cycle.
//   all              uncontended, demo_shared, demo_per_thread, many_locks, read_write.
//
// Paths: /zkcoro-bench/curator-<pid>-<workload> (many_locks: .../curator-<pid>-many_locks/p<i>),
// deleted afterwards, and /zkcoro-bench too if empty (cross_process leaves --path alone).
//
// stdout: one human-readable line per workload, then for each workload that passed
//   RESULT impl=curator workload=<name> ops_per_s=<x> p50_us=<x> p99_us=<x> mean_us=<x> cpu_us_per_op=<x>
// (cross_process: PART impl=curator workload=cross_process id=<id> ops=<n> seconds=<s> instead).
// cpu_us_per_op: process CPU time (all JVM threads: Curator's, ZooKeeper's, JIT, GC) during the
// measured part, per operation.
//
// Time: every loop is bounded in count and checks the --time-limit deadline; lock waits use the
// time left as their timeout (a timeout is a failure). If the run outlasts the limit by more than
// a grace period (cleanup included), a watchdog thread prints a message and halts with status 3.
// Exit status: 0 ok, 1 a check or the run failed, 2 bad usage or no connection, 3 watchdog.

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.common.PathUtils;

public final class CuratorBench extends BenchSupport {
    private static final String PROGRAM = "CuratorBench";
    private static final String ROOT = "/zkcoro-bench";
    private static final long PID = ProcessHandle.current().pid();

    private static final int SESSION_TIMEOUT_MS = 30000;    // requested; the server clamps it
    private static final int CONNECTION_TIMEOUT_MS = 10000;
    private static final long HARD_GRACE_MS = 20000;        // watchdog: time limit + this
    private static final long CLEANUP_GRACE_MS = 5000;      // cleanup may run this long past the limit
    private static final long MAX_SAMPLES_TOTAL = 20_000_000; // duration workloads: cap on cycles, over all threads
    private static final int RW_READERS = 8;
    private static final int RW_WRITERS = 2;

    private static final String[] ALL = {"uncontended", "demo_shared", "demo_per_thread", "many_locks", "read_write"};

    // -----------------------------------------------------------------------------------------
    // Errors

    /** The run failed (a check, a timeout, a ZooKeeper error): exit 1. */
    private static final class BenchFailure extends Exception {
        private static final long serialVersionUID = 1L;
        BenchFailure(String msg) { super(msg); }
    }

    // -----------------------------------------------------------------------------------------
    // Options

    private static final class Options {
        String workload;
        String connect;
        long cycles = 2000;
        long warmup = 200;
        long tasks = 100;          // demo_*
        long manyLocksTasks = 50;  // many_locks: --tasks if given
        long perTask = 20;
        long durationMs = 10000;
        long paths = 1000;
        String path;
        long startAtMs = -1;   // -1: start at once
        long timeLimit = 120;  // seconds
        String id;
        long holdMs = 0;       // cross_process: hold time per acquisition
    }

    private static void usage(java.io.PrintStream out) {
        out.print(
            "usage: java -cp \"$(cat OUTDIR/classpath.txt)\" CuratorBench --workload NAME [--connect HOST:PORT]\n"
            + "         [--cycles N] [--warmup N] [--tasks T] [--per-task K] [--duration-ms D] [--paths P]\n"
            + "         [--path /zkcoro-bench/x] [--start-at-ms EPOCH_MS] [--time-limit SECONDS] [--id NAME]\n"
            + "         [--hold-ms H]\n"
            + "  --workload     uncontended | demo_shared | demo_per_thread | cross_process | many_locks |\n"
            + "                 read_write | all (all but cross_process, in that order, one client)\n"
            + "  --connect      loopback ZooKeeper server (default: $ZK_CONNECT, else 127.0.0.1:2181);\n"
            + "                 127.0.0.0/8, [::1] or localhost only\n"
            + "  --cycles       uncontended: measured acquire+release cycles (default 2000, 1..10000000)\n"
            + "  --warmup       uncontended: unmeasured cycles first (default 200, 0..10000000)\n"
            + "  --tasks        demo_*: threads (default 100); many_locks: threads (default 50); 1..10000\n"
            + "  --per-task     demo_*: acquisitions per thread (default 20, 1..10000000;\n"
            + "                 tasks x per-task at most 10000000)\n"
            + "  --duration-ms  cross_process, many_locks, read_write: run time (default 10000, 1..3600000)\n"
            + "  --paths        many_locks: lock paths (default 1000, 1..100000)\n"
            + "  --path         cross_process (required): the lock path shared by the processes\n"
            + "  --start-at-ms  cross_process: wall-clock start, epoch milliseconds (default: at once)\n"
            + "  --id           cross_process: name in the PART line (default p<pid>)\n"
            + "  --hold-ms      cross_process: hold each acquisition H ms (default 0, 0..60000)\n"
            + "  --time-limit   seconds for the whole run (default 120, 1..86400); exceeding it fails the\n"
            + "                 run, and a watchdog halts the process (status 3) " + HARD_GRACE_MS / 1000
            + " s after it\n"
            + "Output: a line per workload, then RESULT lines (cross_process: a PART line).\n"
            + "Exit status: 0 ok, 1 a check or the run failed, 2 bad usage or no connection, 3 watchdog.\n");
    }

    /** Returns null after printing the usage for --help. */
    private static Options parse(String[] args) throws UsageError {
        Options o = new Options();
        boolean tasksGiven = false;
        String connect = null;
        for (int i = 0; i < args.length; ++i) {
            String arg = args[i];
            if (arg.equals("--help") || arg.equals("-h")) {
                usage(System.out);
                return null;
            }
            if (!arg.startsWith("--")) throw new UsageError("unexpected argument \"" + arg + "\" (see --help)");
            String value;
            int eq = arg.indexOf('=');
            if (eq > 0) {
                value = arg.substring(eq + 1);
                arg = arg.substring(0, eq);
            } else {
                value = null;
            }
            switch (arg) {
                case "--workload": case "--connect": case "--cycles": case "--warmup": case "--tasks":
                case "--per-task": case "--duration-ms": case "--paths": case "--path": case "--start-at-ms":
                case "--time-limit": case "--id": case "--hold-ms":
                    break;
                default:
                    throw new UsageError("unknown option \"" + arg + "\" (see --help)");
            }
            if (value == null) {
                if (i + 1 >= args.length) throw new UsageError(arg + ": missing value (see --help)");
                value = args[++i];
            }
            switch (arg) {
                case "--workload": o.workload = value; break;
                case "--connect": connect = value; break;
                case "--cycles": o.cycles = integer(arg, value, 1, 10_000_000); break;
                case "--warmup": o.warmup = integer(arg, value, 0, 10_000_000); break;
                case "--tasks": o.tasks = integer(arg, value, 1, 10_000); tasksGiven = true; break;
                case "--per-task": o.perTask = integer(arg, value, 1, 10_000_000); break;
                case "--duration-ms": o.durationMs = integer(arg, value, 1, 3_600_000); break;
                case "--paths": o.paths = integer(arg, value, 1, 100_000); break;
                case "--path": o.path = value; break;
                case "--start-at-ms": o.startAtMs = integer(arg, value, 0, 4_102_444_800_000L); break; // < 2100
                case "--time-limit": o.timeLimit = integer(arg, value, 1, 86_400); break;
                case "--id": o.id = value; break;
                case "--hold-ms": o.holdMs = integer(arg, value, 0, 60_000); break;
                default: throw new AssertionError(arg);
            }
        }

        if (o.workload == null) throw new UsageError("--workload NAME is required (see --help)");
        switch (o.workload) {
            case "uncontended": case "demo_shared": case "demo_per_thread": case "cross_process":
            case "many_locks": case "read_write": case "all":
                break;
            default:
                throw new UsageError("--workload: unknown workload \"" + o.workload + "\" (see --help)");
        }
        if (connect == null) {
            String env = System.getenv("ZK_CONNECT");
            connect = (env != null && !env.isEmpty()) ? env : "127.0.0.1:2181";
        }
        o.connect = loopbackOnly(connect);
        o.manyLocksTasks = tasksGiven ? o.tasks : 50;
        if (o.tasks * o.perTask > 10_000_000) {
            throw new UsageError("--tasks x --per-task: at most 10000000 acquisitions");
        }

        boolean cross = o.workload.equals("cross_process");
        if (!cross && (o.path != null || o.startAtMs >= 0 || o.id != null || o.holdMs > 0)) {
            throw new UsageError("--path, --start-at-ms, --id and --hold-ms are for --workload cross_process only");
        }
        long budgetMs = o.timeLimit * 1000;
        if (cross) {
            if (o.path == null) throw new UsageError("cross_process needs --path /zkcoro-bench/NAME");
            try {
                PathUtils.validatePath(o.path);
            } catch (IllegalArgumentException e) {
                throw new UsageError("--path: not a valid ZooKeeper path: " + e.getMessage());
            }
            if (o.path.equals("/")) throw new UsageError("--path: not the root");
            if (o.id == null) o.id = "p" + PID;
            if (o.id.isEmpty() || o.id.chars().anyMatch(c -> Character.isWhitespace(c) || c == '=')) {
                throw new UsageError("--id: a non-empty name without whitespace or '='");
            }
            long wait = o.startAtMs >= 0 ? Math.max(0, o.startAtMs - System.currentTimeMillis()) : 0;
            if (wait + o.durationMs >= budgetMs) {
                throw new UsageError("--start-at-ms is " + wait + " ms away and --duration-ms is " + o.durationMs
                    + ": that does not fit in --time-limit " + o.timeLimit + " s");
            }
        }
        // The duration workloads must fit in the time limit (all: many_locks and read_write).
        long durations = o.workload.equals("all") ? 2 * o.durationMs
            : (o.workload.equals("many_locks") || o.workload.equals("read_write")) ? o.durationMs : 0;
        if (durations >= budgetMs) {
            throw new UsageError("--duration-ms " + o.durationMs + (o.workload.equals("all") ? " (twice, for all)" : "")
                + " does not fit in --time-limit " + o.timeLimit + " s");
        }
        return o;
    }

    // -----------------------------------------------------------------------------------------
    // Time limit

    private static volatile long softDeadlineNs;  // every loop and lock wait checks it
    private static volatile String phase = "starting";

    private static void checkDeadline(String what) throws BenchFailure {
        if (System.nanoTime() - softDeadlineNs > 0) throw new BenchFailure("time limit exceeded while " + what);
    }

    /** What is left of the time limit, as a lock-wait timeout in ms (at least 1). */
    private static long timeLeftMs() {
        return Math.max(1, TimeUnit.NANOSECONDS.toMillis(softDeadlineNs - System.nanoTime()));
    }

    private static void startWatchdog(long hardDeadlineNs, long limitSeconds) {
        BenchSupport.startWatchdog(hardDeadlineNs, () -> {
            System.out.flush();
            System.err.println(PROGRAM + ": time limit of " + limitSeconds + " s exceeded by more than "
                + HARD_GRACE_MS / 1000 + " s (" + phase + "), halting");
        });
    }

    // -----------------------------------------------------------------------------------------
    // Measurements

    /** A growable list of nanosecond samples with a hard capacity. */
    private static final class Samples {
        private long[] a;
        private int n;
        private final int cap;

        Samples(int initial, int cap) {
            this.a = new long[Math.max(1, Math.min(initial, cap))];
            this.cap = cap;
        }
        boolean full() { return n >= cap; }
        void add(long v) {
            if (n == a.length) a = Arrays.copyOf(a, (int) Math.min((long) cap, 2L * a.length));
            a[n++] = v;
        }
        int size() { return n; }
        static long[] merge(List<Samples> all) {
            int total = 0;
            for (Samples s : all) total += s.n;
            long[] out = new long[total];
            int k = 0;
            for (Samples s : all) {
                System.arraycopy(s.a, 0, out, k, s.n);
                k += s.n;
            }
            return out;
        }
    }

    private static final class Result {
        final String name;
        long ops;
        double seconds;
        long cpuNs;
        long[] sorted = new long[0];
        boolean ok = true;
        String failure = "";
        String human = "";

        Result(String name) { this.name = name; }

        void samples(long[] ns) {
            sorted = ns;
            Arrays.sort(sorted);
        }
        /** Nearest rank: the smallest sample with at least p% of the samples at or below it. */
        double percentileUs(double p) {
            if (sorted.length == 0) return 0;
            long rank = (long) Math.ceil(p / 100.0 * sorted.length);
            rank = Math.max(1, Math.min(sorted.length, rank));
            return sorted[(int) rank - 1] / 1e3;
        }
        double meanUs() {
            if (sorted.length == 0) return 0;
            double sum = 0;
            for (long v : sorted) sum += v;
            return sum / sorted.length / 1e3;
        }
        double opsPerS() { return seconds > 0 ? ops / seconds : 0; }
        double cpuUsPerOp() { return ops > 0 ? cpuNs / 1e3 / ops : 0; }
        void fail(String why) {
            ok = false;
            failure = failure.isEmpty() ? why : failure + "; " + why;
        }
        String verdict() { return ok ? "ok" : "FAILED (" + failure + ")"; }
        String resultLine() {
            return String.format(Locale.ROOT,
                "RESULT impl=curator workload=%s ops_per_s=%.1f p50_us=%.1f p99_us=%.1f mean_us=%.1f cpu_us_per_op=%.1f",
                name, opsPerS(), percentileUs(50), percentileUs(99), meanUs(), cpuUsPerOp());
        }
        String latencies(String what) {
            return String.format(Locale.ROOT, "%s p50 %.1f us  p99 %.1f us  mean %.1f us", what, percentileUs(50),
                percentileUs(99), meanUs());
        }
    }

    // -----------------------------------------------------------------------------------------
    // Connection

    /** Bumped on every SUSPENDED or LOST: a run during which it moved is not a valid result. */
    private static final AtomicLong connectionTrouble = new AtomicLong();

    private static CuratorFramework connect(String connect) throws InterruptedException {
        // 3 retries, 100 ms base sleep (Curator randomises: up to 100 ms x 2^(n+1) before retry n).
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(connect)
            .sessionTimeoutMs(SESSION_TIMEOUT_MS)
            .connectionTimeoutMs(CONNECTION_TIMEOUT_MS)
            .retryPolicy(new ExponentialBackoffRetry(100, 3))
            .build();
        client.getConnectionStateListenable().addListener((c, state) -> {
            if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) {
                connectionTrouble.incrementAndGet();
            }
            if (state != ConnectionState.CONNECTED) System.err.println(PROGRAM + ": connection " + state);
        });
        client.start();
        if (!client.blockUntilConnected((int) Math.min(CONNECTION_TIMEOUT_MS, timeLeftMs()), TimeUnit.MILLISECONDS)) {
            client.close();
            return null;
        }
        return client;
    }

    /** "Curator 5.4.0 (recipes)", from the pom.properties in the framework's jar (Debian's has no manifest version). */
    private static String curatorVersion() {
        String res = "/META-INF/maven/org.apache.curator/curator-framework/pom.properties";
        try (java.io.InputStream in = CuratorFramework.class.getResourceAsStream(res)) {
            if (in != null) {
                java.util.Properties p = new java.util.Properties();
                p.load(in);
                String v = p.getProperty("version");
                if (v != null) return "Curator " + v + " recipes";
            }
        } catch (java.io.IOException e) {
            // fall through
        }
        return "Curator (version unknown) recipes";
    }

    private static String lockPath(String workload) {
        return ROOT + "/curator-" + PID + "-" + workload;
    }

    /** Deletes the common root unless another run still uses it. */
    private static void deleteRootIfEmpty(CuratorFramework client) {
        try {
            client.delete().forPath(ROOT);
        } catch (KeeperException.NoNodeException | KeeperException.NotEmptyException e) {
            // gone already, or in use
        } catch (Exception e) {
            System.err.println(PROGRAM + ": warning: deleting " + ROOT + ": " + e);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Threads behind a latch

    private interface Body {
        void run(int index) throws Exception;
    }

    private static final class Crew {
        final AtomicReference<String> error = new AtomicReference<>();  // the first failure
        long cpuNs;    // process CPU time from the start signal to the last join
        long startNs;  // set before the start signal: the threads read it after it (the latch orders it)

        /**
         * Runs body(i) on n threads that start together (a latch); returns the wall time from the
         * start to the last one finishing, in ns. A thread's failure goes to `error` (the others
         * check it and stop early); threads still running when the time limit plus the cleanup grace
         * is over make it throw.
         */
        long run(String name, int n, Body body) throws BenchFailure, InterruptedException {
            CountDownLatch ready = new CountDownLatch(n);
            CountDownLatch go = new CountDownLatch(1);
            long[] finished = new long[n];
            Thread[] threads = new Thread[n];
            for (int i = 0; i < n; ++i) {
                final int index = i;
                threads[i] = new Thread(() -> {
                    ready.countDown();
                    try {
                        if (!go.await(timeLeftMs(), TimeUnit.MILLISECONDS)) throw new BenchFailure("start signal never came");
                        body.run(index);
                    } catch (BenchFailure e) {
                        error.compareAndSet(null, e.getMessage());
                    } catch (Throwable e) {
                        error.compareAndSet(null, e.toString());
                    } finally {
                        finished[index] = System.nanoTime();
                    }
                }, name + "-" + i);
                threads[i].setDaemon(true);
                threads[i].start();
            }
            if (!ready.await(timeLeftMs(), TimeUnit.MILLISECONDS)) {
                go.countDown();
                throw new BenchFailure(name + ": threads did not start within the time limit");
            }
            long cpu0 = cpuNs();
            long start = System.nanoTime();
            startNs = start;
            go.countDown();
            // Each thread ends by the time limit (its lock waits time out then); give them a grace.
            long giveUp = softDeadlineNs + TimeUnit.MILLISECONDS.toNanos(CLEANUP_GRACE_MS);
            int alive = 0;
            for (Thread t : threads) {
                long left = giveUp - System.nanoTime();
                if (left > 0) t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                if (t.isAlive()) ++alive;
            }
            cpuNs = cpuNs() - cpu0;
            if (alive > 0) throw new BenchFailure(name + ": " + alive + " of " + n + " threads still running after the time limit");
            long end = start;
            for (long f : finished) end = Math.max(end, f);  // join() orders the writes before this
            return end - start;
        }
    }

    // -----------------------------------------------------------------------------------------
    // Workloads

    /** When ZKCORO_BENCH_SAMPLES names a directory: every latency in us, one a line, for bench/plot.sh. */
    private static void writeSamples(String file, long[] ns) {
        String dir = System.getenv("ZKCORO_BENCH_SAMPLES");
        if (dir == null || dir.isEmpty()) return;
        StringBuilder b = new StringBuilder(ns.length * 8);
        for (long v : ns) b.append(String.format(Locale.ROOT, "%.3f%n", v / 1e3));
        try {
            java.nio.file.Files.writeString(java.nio.file.Path.of(dir, file), b);
        } catch (java.io.IOException e) {
            System.err.println(PROGRAM + ": warning: could not write the samples: " + e.getMessage());
        }
    }

    private static Result uncontended(CuratorFramework client, Options o, List<String> used) throws Exception {
        Result r = new Result("uncontended");
        String path = lockPath(r.name);
        used.add(path);
        InterProcessMutex m = new InterProcessMutex(client, path);
        for (long i = 0; i < o.warmup; ++i) {
            checkDeadline("warming up (uncontended)");
            cycle(m, "uncontended");
        }
        long[] ns = new long[(int) o.cycles];
        long cpu0 = cpuNs();
        long start = System.nanoTime();
        for (int i = 0; i < o.cycles; ++i) {
            checkDeadline("measuring uncontended cycles");
            long t0 = System.nanoTime();
            cycle(m, "uncontended");
            ns[i] = System.nanoTime() - t0;
        }
        r.seconds = (System.nanoTime() - start) / 1e9;
        r.cpuNs = cpuNs() - cpu0;
        r.ops = o.cycles;
        r.samples(ns);
        writeSamples("curator-uncontended.txt", r.sorted);
        r.human = String.format(Locale.ROOT,
            "uncontended: %d cycles after %d warm-up in %.3f s: %.1f cycles/s; %s per acquire+release; "
                + "cpu %.1f us/cycle: %s",
            r.ops, o.warmup, r.seconds, r.opsPerS(), r.latencies("cycle"), r.cpuUsPerOp(), r.verdict());
        return r;
    }

    private static void cycle(InterProcessMutex m, String what) throws Exception {
        if (!m.acquire(timeLeftMs(), TimeUnit.MILLISECONDS)) {
            throw new BenchFailure(what + ": acquire timed out (time limit)");
        }
        m.release();
    }

    /** Shared by the demo's threads. */
    private static final class DemoState {
        long counter;  // plain: only touched while holding the lock
        final AtomicInteger inside = new AtomicInteger();
        final AtomicInteger maxInside = new AtomicInteger();
        final AtomicLong acquisitions = new AtomicLong();
    }

    private static Result demo(CuratorFramework client, Options o, boolean shared, List<String> used) throws Exception {
        Result r = new Result(shared ? "demo_shared" : "demo_per_thread");
        String path = lockPath(r.name);
        used.add(path);
        final int tasks = (int) o.tasks;
        final int perTask = (int) o.perTask;
        final long total = (long) tasks * perTask;
        DemoState st = new DemoState();
        st.counter = total;
        // demo_shared: one object for all threads; demo_per_thread: one each (made before the start).
        InterProcessMutex sharedLock = shared ? new InterProcessMutex(client, path) : null;
        InterProcessMutex[] own = new InterProcessMutex[shared ? 0 : tasks];
        for (int t = 0; t < own.length; ++t) own[t] = new InterProcessMutex(client, path);
        List<Samples> waits = new ArrayList<>();
        for (int t = 0; t < tasks; ++t) waits.add(new Samples(perTask, perTask));
        Crew crew = new Crew();
        long wall = crew.run(r.name, tasks, index -> {
            InterProcessMutex lock = shared ? sharedLock : own[index];
            Samples w = waits.get(index);
            for (int i = 0; i < perTask; ++i) {
                if (crew.error.get() != null) break;  // another thread failed: stop early
                checkDeadline("running " + r.name);
                long t0 = System.nanoTime();
                if (!lock.acquire(timeLeftMs(), TimeUnit.MILLISECONDS)) {
                    throw new BenchFailure(r.name + ": acquire timed out (time limit)");
                }
                try {
                    w.add(System.nanoTime() - t0);
                    st.acquisitions.incrementAndGet();
                    int in = st.inside.incrementAndGet();
                    st.maxInside.accumulateAndGet(in, Math::max);
                    // Read, let the others run, write: a second thread inside would lose an update.
                    long before = st.counter;
                    Thread.yield();
                    st.counter = before - 1;
                    st.inside.decrementAndGet();
                } finally {
                    lock.release();
                }
            }
        });
        r.seconds = wall / 1e9;
        r.cpuNs = crew.cpuNs;
        r.ops = st.acquisitions.get();
        r.samples(Samples.merge(waits));
        long counterEnd = st.counter;  // every thread was joined (join orders their writes before this)
        if (crew.error.get() != null) r.fail(crew.error.get());
        if (r.ops != total) r.fail(r.ops + " acquisitions of " + total);
        if (counterEnd != 0) r.fail("counter ended at " + counterEnd + ", expected 0");
        if (st.maxInside.get() != 1) r.fail(st.maxInside.get() + " threads were inside the lock at once");
        r.human = String.format(Locale.ROOT,
            "%s: %d threads x %d = %d acquisitions in %.3f s (%s): %.1f acquisitions/s; %s; cpu %.1f us/acquisition; "
                + "counter ended at %d, max inside %d: %s",
            r.name, tasks, perTask, r.ops, r.seconds, shared ? "one InterProcessMutex" : "one InterProcessMutex per thread",
            r.opsPerS(), r.latencies("wait per acquisition"), r.cpuUsPerOp(), counterEnd, st.maxInside.get(), r.verdict());
        return r;
    }

    private static Result manyLocks(CuratorFramework client, Options o, List<String> used) throws Exception {
        Result r = new Result("many_locks");
        String parent = lockPath(r.name);
        used.add(parent);
        final int nPaths = (int) o.paths;
        final int tasks = (int) o.manyLocksTasks;
        InterProcessMutex[] locks = new InterProcessMutex[nPaths];
        for (int i = 0; i < nPaths; ++i) locks[i] = new InterProcessMutex(client, parent + "/p" + i);
        final int cap = (int) Math.max(1000, MAX_SAMPLES_TOTAL / tasks);
        List<Samples> cycles = new ArrayList<>();
        for (int t = 0; t < tasks; ++t) cycles.add(new Samples(1024, cap));
        Crew crew = new Crew();
        final long durationNs = TimeUnit.MILLISECONDS.toNanos(o.durationMs);
        AtomicInteger capped = new AtomicInteger();
        long wall = crew.run(r.name, tasks, index -> {
            Samples s = cycles.get(index);
            long end = crew.startNs + durationNs;
            for (int i = 0; ; ++i) {
                if (i > 0 && System.nanoTime() - end >= 0) break;
                if (s.full()) { capped.incrementAndGet(); break; }
                if (crew.error.get() != null) break;
                checkDeadline("running many_locks");
                InterProcessMutex m = locks[ThreadLocalRandom.current().nextInt(nPaths)];
                long t0 = System.nanoTime();
                cycle(m, "many_locks");
                s.add(System.nanoTime() - t0);
            }
        });
        r.seconds = wall / 1e9;
        r.cpuNs = crew.cpuNs;
        r.samples(Samples.merge(cycles));
        r.ops = r.sorted.length;
        if (crew.error.get() != null) r.fail(crew.error.get());
        r.human = String.format(Locale.ROOT,
            "many_locks: %d threads on %d paths (one InterProcessMutex per path, shared), %d cycles in %.3f s: "
                + "%.1f cycles/s; %s per acquire+release; cpu %.1f us/cycle%s: %s",
            tasks, nPaths, r.ops, r.seconds, r.opsPerS(), r.latencies("cycle"), r.cpuUsPerOp(),
            capped.get() > 0 ? "; " + capped.get() + " threads hit the cap of " + cap + " cycles" : "", r.verdict());
        return r;
    }

    private static List<Result> readWrite(CuratorFramework client, Options o, List<String> used) throws Exception {
        Result reads = new Result("rw_read");
        Result writes = new Result("rw_write");
        String path = lockPath("read_write");
        used.add(path);
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
        final int n = RW_READERS + RW_WRITERS;
        final int cap = (int) (MAX_SAMPLES_TOTAL / n);
        List<Samples> cycles = new ArrayList<>();
        for (int t = 0; t < n; ++t) cycles.add(new Samples(1024, cap));
        AtomicInteger readersInside = new AtomicInteger();
        AtomicInteger writersInside = new AtomicInteger();
        AtomicInteger maxReaders = new AtomicInteger();
        AtomicLong violations = new AtomicLong();
        final long durationNs = TimeUnit.MILLISECONDS.toNanos(o.durationMs);
        Crew crew = new Crew();
        long wall = crew.run("read_write", n, index -> {
            boolean writer = index >= RW_READERS;
            InterProcessMutex lock = writer ? rw.writeLock() : rw.readLock();
            String what = writer ? "read_write (writer)" : "read_write (reader)";
            Samples s = cycles.get(index);
            long end = crew.startNs + durationNs;
            for (int i = 0; ; ++i) {
                if (i > 0 && System.nanoTime() - end >= 0) break;
                if (s.full() || crew.error.get() != null) break;
                checkDeadline("running read_write");
                long t0 = System.nanoTime();
                if (!lock.acquire(timeLeftMs(), TimeUnit.MILLISECONDS)) {
                    throw new BenchFailure(what + ": acquire timed out (time limit)");
                }
                try {
                    if (writer) {
                        if (writersInside.incrementAndGet() > 1 || readersInside.get() > 0) violations.incrementAndGet();
                    } else {
                        maxReaders.accumulateAndGet(readersInside.incrementAndGet(), Math::max);
                        if (writersInside.get() > 0) violations.incrementAndGet();
                    }
                    Thread.yield();
                    (writer ? writersInside : readersInside).decrementAndGet();
                } finally {
                    lock.release();
                }
                s.add(System.nanoTime() - t0);
            }
        });
        reads.seconds = writes.seconds = wall / 1e9;
        reads.samples(Samples.merge(cycles.subList(0, RW_READERS)));
        writes.samples(Samples.merge(cycles.subList(RW_READERS, n)));
        reads.ops = reads.sorted.length;
        writes.ops = writes.sorted.length;
        // One process does both kinds: its CPU time is split in proportion to the operations, so
        // that cpu_us_per_op is the same figure (CPU time / all operations) on both lines.
        long allOps = reads.ops + writes.ops;
        if (allOps > 0) {
            reads.cpuNs = crew.cpuNs * reads.ops / allOps;
            writes.cpuNs = crew.cpuNs * writes.ops / allOps;
        }
        for (Result r : List.of(reads, writes)) {
            if (crew.error.get() != null) r.fail(crew.error.get());
            if (violations.get() > 0) r.fail(violations.get() + " exclusion violations");
        }
        if (reads.ops == 0) reads.fail("no read acquisitions");
        if (writes.ops == 0) writes.fail("no write acquisitions");
        String verdict = reads.ok && writes.ok ? "ok"
            : "FAILED (" + (reads.ok ? writes.failure : reads.failure) + ")";
        reads.human = String.format(Locale.ROOT,
            "read_write: %d readers, %d writers on one InterProcessReadWriteLock for %.3f s: %d reads %.1f/s (%s), "
                + "%d writes %.1f/s (%s); cpu %.1f us/op; max readers inside at once %d, exclusion violations %d: %s",
            RW_READERS, RW_WRITERS, reads.seconds, reads.ops, reads.opsPerS(), reads.latencies("cycle"), writes.ops,
            writes.opsPerS(), writes.latencies("cycle"), allOps > 0 ? crew.cpuNs / 1e3 / allOps : 0.0,
            maxReaders.get(), violations.get(), verdict);
        return List.of(reads, writes);
    }

    /** One process of several on --path: run() prints its PART line. */
    private static Result crossProcess(CuratorFramework client, Options o) throws Exception {
        Result r = new Result("cross_process");
        long connectedUptimeMs = ManagementFactory.getRuntimeMXBean().getUptime();
        InterProcessMutex m = new InterProcessMutex(client, o.path);
        long lateMs = 0;
        if (o.startAtMs >= 0) {
            for (int i = 0; i < 100_000; ++i) {
                long wait = o.startAtMs - System.currentTimeMillis();
                if (wait <= 0) {
                    lateMs = -wait;
                    break;
                }
                checkDeadline("waiting for --start-at-ms");
                Thread.sleep(Math.min(wait, timeLeftMs()));
            }
            if (lateMs > 100) {
                System.err.println(PROGRAM + "[" + o.id + "]: warning: started " + lateMs + " ms after --start-at-ms (connected "
                    + connectedUptimeMs + " ms after the JVM started: give the processes more time to start)");
            }
        }
        final int cap = (int) MAX_SAMPLES_TOTAL;
        Samples s = new Samples(4096, cap);
        long cpu0 = cpuNs();
        long start = System.nanoTime();
        long end = start + TimeUnit.MILLISECONDS.toNanos(o.durationMs);
        for (int i = 0; ; ++i) {
            if (i > 0 && System.nanoTime() - end >= 0) break;
            if (s.full()) break;
            checkDeadline("running cross_process");
            long t0 = System.nanoTime();
            if (o.holdMs > 0) {
                if (!m.acquire(timeLeftMs(), TimeUnit.MILLISECONDS)) {
                    throw new BenchFailure("cross_process: acquire timed out (time limit)");
                }
                s.add(System.nanoTime() - t0);  // the wait for the lock
                Thread.sleep(o.holdMs);
                m.release();
            } else {
                cycle(m, "cross_process");
                s.add(System.nanoTime() - t0);
            }
        }
        r.seconds = (System.nanoTime() - start) / 1e9;
        r.cpuNs = cpuNs() - cpu0;
        r.samples(Samples.merge(List.of(s)));
        r.ops = r.sorted.length;
        r.human = String.format(Locale.ROOT,
            "cross_process[%s]: %d cycles on %s in %.3f s (start %d ms late): %.1f cycles/s; %s per acquire+release "
                + "(contended); cpu %.1f us/cycle: %s",
            o.id, r.ops, o.path, r.seconds, lateMs, r.opsPerS(), r.latencies("cycle"), r.cpuUsPerOp(), r.verdict());
        return r;
    }

    // -----------------------------------------------------------------------------------------
    // The run

    private static int run(Options o) {
        phase = "connecting to " + o.connect;
        CuratorFramework client;
        try {
            client = connect(o.connect);
        } catch (Exception e) {
            System.err.println(PROGRAM + ": cannot connect to " + o.connect + ": " + e);
            return 2;
        }
        if (client == null) {
            System.err.println(PROGRAM + ": cannot connect to " + o.connect + " within "
                + Math.min(CONNECTION_TIMEOUT_MS, o.timeLimit * 1000) + " ms");
            return 2;
        }

        List<Result> results = new ArrayList<>();
        List<String> used = new ArrayList<>();
        boolean failed = false;
        try {
            String negotiated;
            try {
                negotiated = client.getZookeeperClient().getZooKeeper().getSessionTimeout() + " ms";
            } catch (Exception e) {
                negotiated = "unknown";
            }
            String version = curatorVersion();
            System.out.printf(Locale.ROOT,
                "curator lock benchmark: %s, server %s, session timeout %s (%d ms requested), "
                    + "Java %s, pid %d%n",
                version, o.connect, negotiated, SESSION_TIMEOUT_MS,
                System.getProperty("java.vm.version"), PID);
            System.out.flush();

            List<String> workloads = o.workload.equals("all") ? List.of(ALL) : List.of(o.workload);
            for (String w : workloads) {
                phase = "workload " + w;
                long trouble = connectionTrouble.get();
                List<Result> got;
                try {
                    switch (w) {
                        case "uncontended": got = List.of(uncontended(client, o, used)); break;
                        case "demo_shared": got = List.of(demo(client, o, true, used)); break;
                        case "demo_per_thread": got = List.of(demo(client, o, false, used)); break;
                        case "many_locks": got = List.of(manyLocks(client, o, used)); break;
                        case "read_write": got = readWrite(client, o, used); break;
                        case "cross_process": got = List.of(crossProcess(client, o)); break;
                        default: throw new AssertionError(w);
                    }
                } catch (BenchFailure e) {
                    System.out.println(w + ": FAILED (" + e.getMessage() + ")");
                    System.out.flush();
                    failed = true;
                    break;
                } catch (Exception e) {
                    System.out.println(w + ": FAILED (" + e + ")");
                    System.out.flush();
                    failed = true;
                    break;
                }
                if (connectionTrouble.get() != trouble) {
                    for (Result r : got) r.fail("the connection was SUSPENDED or LOST during the run");
                }
                for (Result r : got) {
                    if (!r.human.isEmpty()) System.out.println(r.human);
                }
                System.out.flush();
                results.addAll(got);
                boolean ok = got.stream().allMatch(r -> r.ok);
                if (!ok) {
                    failed = true;
                    break;  // reported; the exit status says it
                }
            }
        } finally {
            // Cleanup, with a few seconds of its own if the time limit was what failed.
            phase = "cleaning up";
            long minDeadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLEANUP_GRACE_MS);
            if (softDeadlineNs - minDeadline < 0) softDeadlineNs = minDeadline;
            for (String p : used) deleteTree(client, p);
            if (!used.isEmpty()) deleteRootIfEmpty(client);
            phase = "closing the client";
            client.close();
        }

        if (o.workload.equals("cross_process")) {
            for (Result r : results) {
                if (r.ok) {
                    System.out.printf(Locale.ROOT,
                        "PART impl=curator workload=cross_process id=%s ops=%d seconds=%.3f p50_us=%.1f p99_us=%.1f%n",
                        o.id, r.ops, r.seconds, r.percentileUs(50), r.percentileUs(99));
                }
            }
        } else {
            System.out.println("(uncontended, many_locks, rw_*: p50/p99 per acquire+release cycle; demo_*: p50/p99 of "
                + "the wait from acquire() to the grant; cpu: process CPU time of the measured part per op)");
            for (Result r : results) {
                if (r.ok) System.out.println(r.resultLine());  // a failed workload's figures are not results
            }
        }
        System.out.flush();
        if (failed) {
            System.err.println(PROGRAM + ": FAILED");
            return 1;
        }
        return 0;
    }

    public static void main(String[] args) {
        program = PROGRAM;
        quietLogs();
        long t0 = System.nanoTime();
        Options o;
        try {
            o = parse(args);
        } catch (UsageError e) {
            System.err.println(PROGRAM + ": " + e.getMessage());
            usage(System.err);
            System.exit(2);
            return;
        }
        if (o == null) {
            System.out.flush();
            System.exit(0);
            return;
        }
        softDeadlineNs = t0 + TimeUnit.SECONDS.toNanos(o.timeLimit);
        startWatchdog(softDeadlineNs + TimeUnit.MILLISECONDS.toNanos(HARD_GRACE_MS), o.timeLimit);
        int rc;
        try {
            rc = run(o);
        } catch (Throwable e) {
            System.err.println(PROGRAM + ": error: " + e);
            e.printStackTrace(System.err);
            rc = 1;
        }
        System.out.flush();
        System.err.flush();
        System.exit(rc);
    }
}
