// CuratorScale: curves 1 and 2 of bench/scale.sh (issue 36) run with Apache Curator's
// InterProcessMutex, one JVM, one thread per waiter (Curator's acquire() blocks its thread), so that
// bench/scale_curator.sh can set Curator's points beside zkcoro's (bench/scale_bench.cpp):
//
//   waiters  --tasks N threads, each with its own InterProcessMutex on --path, each acquiring it
//            --rounds times and queueing again at once; with --gate-ms G the main thread holds the
//            lock (not counted) while the threads enter, --entry-per-s a second, and releases it
//            once every thread has entered and G ms have passed, so that the queue is N long when
//            the handoffs begin;
//   locks    --locks L > 1: each acquisition takes one of PATH/l0 ... PATH/l<L-1> at random, for
//            --duration-ms; each thread keeps its own InterProcessMutex per path it has used
//            (threads sharing one would all wake at each of its releases: Curator notifies every
//            thread waiting on one LockInternals object).
//
//   bench/curator/build.sh OUTDIR
//   java -cp "$(cat OUTDIR/classpath.txt)" CuratorScale --path /zkcoro-scale/x --tasks 100 --rounds 2
//        [--locks L --duration-ms D] [--gate-ms G] [--entry-per-s E] [--events FILE] [--id NAME]
//        [--connect HOST:PORT] [--time-limit SECONDS]
//   java -cp ... CuratorScale --check-clock
//
// Prints one PART line in the format of bench/scale_bench.cpp, for bench/scale_merge.py:
//   PART id=curator tasks=N rounds=R locks=L duration_ms=D acquisitions=A curator_ops=O cpu_us=C
//        bytes_in=B rss_kb=M rss_kb_entered=M0 wall_ms=W server_packets=S threads=T ...
// server_packets: the server's zk_packets_received (mntr) over the span, less the mntr reads
// (each counts one), so every request of this client (and of any other: run it alone), the
// figure to set beside zkcoro's requests; server_znodes, server_watches: the peaks of mntr,
// sampled every 200 ms; curator_ops: the operations Curator's tracer reports (create, getChildren, getData,
// delete, ...), fewer than the requests: not every request Curator sends is traced (the parent
// containers' ZKPaths.mkdirs is not), hence no requests= key; cpu_us: the JVM's CPU time (every thread: Curator's, ZooKeeper's,
// the JIT's, the GC's); bytes_in: bytes received on the client's TCP connection (tcp_info, read
// with ss; left out if that fails: /proc/self/io's rchar would add the JVM's reads of its class
// files and of cgroup files, several times the replies at 10 waiters); rss_kb: VmRSS of /proc/self/status at
// the end, rss_kb_entered once every thread has entered. No watch_events: Curator has no count.
// The span is the same as zkcoro-scale-bench's: from before the gate's acquisition to the last
// release. With --events FILE, "LOCK GRANT_NS RELEASE_NS" per acquisition (System.nanoTime, which
// is CLOCK_MONOTONIC on Linux: --check-clock tests it against python3's clock_gettime).
//
// Where it stops: a thread that cannot be started (OutOfMemoryError: unable to create native
// thread) ends the run with "STOP reason=threads started=K ..."; the time limit with
// "STOP reason=time ..."; an OutOfMemoryError of the heap with "STOP reason=memory ...".
// Exit status: 0 ok, 1 failed or stopped, 2 bad usage or no connection, 3 watchdog.
// Every wait is bounded by the time left of --time-limit; a watchdog halts after it plus 20 s.

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.drivers.AdvancedTracerDriver;
import org.apache.curator.drivers.EventTrace;
import org.apache.curator.drivers.OperationTrace;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.common.PathUtils;

public final class CuratorScale extends BenchSupport {
    private static final String PROGRAM = "CuratorScale";
    private static final int SESSION_TIMEOUT_MS = 30000;
    private static final int CONNECTION_TIMEOUT_MS = 10000;
    private static final long HARD_GRACE_MS = 20000;
    private static final long CLEANUP_GRACE_MS = 10000;
    private static final long MAX_HOLDS_PER_THREAD = 10_000_000;

    /** Where the run stopped (STOP reason=...), or a failed check. */
    private static final class Stop extends Exception {
        private static final long serialVersionUID = 1L;
        final String reason;
        Stop(String reason, String msg) {
            super(msg);
            this.reason = reason;
        }
    }

    private static final class Options {
        String connect;
        String path;
        String id = "curator";
        String events;
        long tasks = 10;
        long rounds = 3;
        long locks = 1;
        long durationMs = 0;
        long entryPerS = 2000;
        long gateMs = 0;
        long timeLimit = 300;
        boolean checkClock;
    }

    private static final String USAGE =
        "usage: java -cp \"$(cat OUTDIR/classpath.txt)\" CuratorScale --path /zkcoro-scale/NAME [--tasks N]\n"
        + "         [--rounds R] [--locks L] [--duration-ms D] [--entry-per-s E] [--gate-ms G]\n"
        + "         [--events FILE] [--id NAME] [--connect HOST:PORT] [--time-limit SECONDS]\n"
        + "       java -cp ... CuratorScale --check-clock\n"
        + "  --tasks        threads, one waiter each (default 10, 1..100000)\n"
        + "  --rounds       acquisitions per thread (default 3, 1..10000)\n"
        + "  --locks        lock paths: 1, --path itself; more, PATH/l0 ... PATH/l<L-1>, one at random\n"
        + "                 per acquisition (default 1, 1..1000000)\n"
        + "  --duration-ms  acquire until this long has passed instead of --rounds times (default 0: rounds)\n"
        + "  --entry-per-s  threads started per second (default 2000)\n"
        + "  --gate-ms      hold the lock (--locks 1) from the start until every thread has entered and\n"
        + "                 this long has passed, not counted (default 0: no gate)\n"
        + "  --events       write \"LOCK GRANT_NS RELEASE_NS\" per acquisition to this file\n"
        + "  --id           name in the PART line (default curator)\n"
        + "  --connect      loopback ZooKeeper HOST:PORT (default $ZK_CONNECT)\n"
        + "  --time-limit   seconds for the whole run (default 300); the watchdog halts 20 s after it\n"
        + "  --check-clock  check that System.nanoTime is CLOCK_MONOTONIC (python3's clock_gettime) and exit\n";

    private static Options parse(String[] args) throws UsageError {
        Options o = new Options();
        for (int i = 0; i < args.length; ++i) {
            String a = args[i];
            if (a.equals("--help") || a.equals("-h")) return null;
            if (a.equals("--check-clock")) {
                o.checkClock = true;
                continue;
            }
            if (i + 1 >= args.length) throw new UsageError(a + ": missing value (or unknown option)");
            String v = args[++i];
            switch (a) {
                case "--connect": o.connect = v; break;
                case "--path": o.path = v; break;
                case "--id": o.id = v; break;
                case "--events": o.events = v; break;
                case "--tasks": o.tasks = integer(a, v, 1, 100_000); break;
                case "--rounds": o.rounds = integer(a, v, 1, 10_000); break;
                case "--locks": o.locks = integer(a, v, 1, 1_000_000); break;
                case "--duration-ms": o.durationMs = integer(a, v, 0, 3_600_000); break;
                case "--entry-per-s": o.entryPerS = integer(a, v, 1, 1_000_000); break;
                case "--gate-ms": o.gateMs = integer(a, v, 0, 3_600_000); break;
                case "--time-limit": o.timeLimit = integer(a, v, 1, 86_400); break;
                default: throw new UsageError("unknown option \"" + a + "\"");
            }
        }
        if (o.checkClock) return o;
        if (o.path == null) throw new UsageError("--path is required");
        try {
            PathUtils.validatePath(o.path);
        } catch (IllegalArgumentException e) {
            throw new UsageError("--path: " + e.getMessage());
        }
        if (o.path.equals("/")) throw new UsageError("--path: not the root");
        if (o.id.isEmpty() || o.id.chars().anyMatch(c -> Character.isWhitespace(c) || c == '=')) {
            throw new UsageError("--id: a non-empty name without whitespace or '='");
        }
        if (o.gateMs > 0 && o.locks != 1) throw new UsageError("--gate-ms is for --locks 1");
        if (o.connect == null) o.connect = System.getenv("ZK_CONNECT");
        if (o.connect == null || o.connect.isEmpty()) throw new UsageError("--connect or $ZK_CONNECT is required");
        o.connect = loopbackOnly(o.connect);
        return o;
    }

    // -----------------------------------------------------------------------------------------
    // Time and measurements

    private static volatile long softDeadlineNs;

    private static long timeLeftMs() {
        return Math.max(1, TimeUnit.NANOSECONDS.toMillis(softDeadlineNs - System.nanoTime()));
    }

    private static void checkDeadline(String what) throws Stop {
        if (System.nanoTime() - softDeadlineNs > 0) throw new Stop("time", "time limit exceeded while " + what);
    }

    /** A field (kB) of /proc/self/status; -1 if missing. */
    private static long procField(String file, String key) {
        try {
            for (String line : Files.readAllLines(Path.of(file))) {
                if (line.startsWith(key + ":")) {
                    return Long.parseLong(line.substring(key.length() + 1).trim().split("\\s+")[0]);
                }
            }
        } catch (IOException | NumberFormatException e) {
            // -1
        }
        return -1;
    }

    /** mntr commands sent: each is one of the server's zk_packets_received, answered or not. */
    private static final AtomicLong mntrSent = new AtomicLong();

    /** The server's mntr (a four-letter word on loopback) as key -> value; empty if unavailable. */
    private static Map<String, Long> mntr(String connect) {
        Map<String, Long> out = new HashMap<>();
        int colon = connect.lastIndexOf(':');
        String host = connect.substring(0, colon).replace("[", "").replace("]", "");
        int port = Integer.parseInt(connect.substring(colon + 1));
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 2000);
            s.setSoTimeout(2000);
            OutputStream o = s.getOutputStream();
            o.write("mntr".getBytes(StandardCharsets.US_ASCII));
            o.flush();
            mntrSent.incrementAndGet();
            BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.US_ASCII));
            for (int i = 0; i < 1000; ++i) {
                String line = in.readLine();
                if (line == null) break;
                int tab = line.indexOf('\t');
                if (tab < 0) continue;
                try {
                    out.put(line.substring(0, tab), Long.parseLong(line.substring(tab + 1).trim()));
                } catch (NumberFormatException e) {
                    // not a number (zk_version, zk_server_state)
                }
            }
        } catch (IOException e) {
            System.err.println(PROGRAM + ": warning: mntr: " + e);
        }
        return out;
    }

    /**
     * Samples mntr every 200 ms meanwhile (as bench/zk_mntr.py): the peaks of znodes and watches.
     * Each mntr is one of the server's zk_packets_received: mntrSent says how many to take off.
     */
    private static final class Sampler extends Thread {
        final String connect;
        volatile boolean stop;
        long znodes, watches;
        Sampler(String connect) {
            super("mntr-sampler");
            this.connect = connect;
            setDaemon(true);
        }
        @Override public void run() {
            for (int i = 0; i < 100_000 && !stop; ++i) {
                Map<String, Long> m = mntr(connect);
                znodes = Math.max(znodes, m.getOrDefault("zk_znode_count", 0L));
                watches = Math.max(watches, m.getOrDefault("zk_watch_count", 0L));
                synchronized (this) {
                    if (stop) break;
                    try {
                        wait(200);  // notified by finish()
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
        }
        void finish() throws InterruptedException {
            synchronized (this) {
                stop = true;
                notifyAll();
            }
            join(10_000);
        }
    }

    /**
     * Bytes received on the client's TCP connection (tcp_info's bytes_received, read with
     * `ss -tin`), as zkcoro-scale-bench counts them; -1 if unavailable. The socket's local port
     * comes from ZooKeeper's testableLocalSocketAddress() (protected: reflection).
     */
    private static long bytesReceived(CuratorFramework client) {
        try {
            org.apache.zookeeper.ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
            java.lang.reflect.Method m = org.apache.zookeeper.ZooKeeper.class.getDeclaredMethod("testableLocalSocketAddress");
            m.setAccessible(true);
            InetSocketAddress local = (InetSocketAddress) m.invoke(zk);
            if (local == null) return -1;
            Process p = new ProcessBuilder("ss", "-tinH", "state", "established", "sport", "= :" + local.getPort())
                .redirectErrorStream(true).start();
            String text;
            try (InputStream in = p.getInputStream()) {
                text = new String(in.readAllBytes(), StandardCharsets.US_ASCII);
            }
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return -1;
            }
            java.util.regex.Matcher x = java.util.regex.Pattern.compile("bytes_received:(\\d+)").matcher(text);
            long found = -1;
            int sockets = 0;
            while (x.find()) {
                found = Long.parseLong(x.group(1));
                ++sockets;
            }
            return sockets == 1 ? found : -1;
        } catch (Exception e) {
            System.err.println(PROGRAM + ": warning: bytes received: " + e);
            return -1;
        }
    }

    /** Counts Curator's operations (one OperationTrace per foreground or background operation). */
    private static final class OperationCounter extends AdvancedTracerDriver {
        final AtomicLong operations = new AtomicLong();
        @Override public void addTrace(OperationTrace trace) { operations.incrementAndGet(); }
        @Override public void addEvent(EventTrace trace) { }
    }

    // -----------------------------------------------------------------------------------------
    // --check-clock

    /**
     * One python3 reading of CLOCK_MONOTONIC between two System.nanoTime readings, through a pipe to
     * a running python3 (a round trip of well under a millisecond): the narrowest of 50 brackets
     * must hold it, and, to tell the clocks apart, leave out CLOCK_MONOTONIC_RAW (NTP's slew
     * separates it by milliseconds after hours of uptime). CLOCK_BOOTTIME equals CLOCK_MONOTONIC
     * on a machine that never suspended: then either serves.
     */
    private static int checkClock() throws Exception {
        String script = "import sys, time\n"
            + "for _ in sys.stdin:\n"
            + "    print(time.clock_gettime_ns(time.CLOCK_MONOTONIC), time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW),"
            + " time.clock_gettime_ns(time.CLOCK_BOOTTIME), flush=True)\n";
        Process p = new ProcessBuilder("python3", "-c", script).redirectErrorStream(true).start();
        try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.US_ASCII));
             OutputStream out = p.getOutputStream()) {
            long best = Long.MAX_VALUE, mono = 0, raw = 0, boot = 0, before = 0, after = 0;
            for (int i = 0; i < 50; ++i) {
                long b = System.nanoTime();
                out.write('\n');
                out.flush();
                String line = in.readLine();  // python3 answers at once; its end closes the pipe
                long a = System.nanoTime();
                if (line == null) throw new IOException("python3 ended without an answer");
                String[] f = line.trim().split(" ");
                if (a - b < best) {
                    best = a - b;
                    before = b;
                    after = a;
                    mono = Long.parseLong(f[0]);
                    raw = Long.parseLong(f[1]);
                    boot = Long.parseLong(f[2]);
                }
            }
            boolean inMono = before <= mono && mono <= after;
            System.out.println(String.format(Locale.ROOT,
                "CLOCK nanotime_is_monotonic=%s bracket_us=%.1f monotonic_raw_ruled_out=%s (raw-monotonic %.3f ms) "
                    + "boottime_ruled_out=%s (boottime-monotonic %.3f ms)",
                inMono ? "yes" : "no", best / 1e3, raw < before || raw > after ? "yes" : "no", (raw - mono) / 1e6,
                boot < before || boot > after ? "yes" : "no", (boot - mono) / 1e6));
            return inMono ? 0 : 1;
        } finally {
            p.destroy();
            if (!p.waitFor(5, TimeUnit.SECONDS)) p.destroyForcibly();
        }
    }

    // -----------------------------------------------------------------------------------------
    // The run

    /** The holds of one thread: lock, grant and release (ns) per acquisition. */
    private static final class Holds {
        long[] a;
        int n;  // acquisitions
        Holds(long expected) { a = new long[(int) Math.max(3, Math.min(3 * expected, 3 * 4096))]; }
        void add(long lock, long grant, long release) throws Stop {
            if (n >= MAX_HOLDS_PER_THREAD) throw new Stop("memory", "more than " + MAX_HOLDS_PER_THREAD + " holds in one thread");
            if (3 * n + 3 > a.length) a = Arrays.copyOf(a, (int) Math.min(3 * MAX_HOLDS_PER_THREAD, 2L * a.length));
            a[3 * n] = lock;
            a[3 * n + 1] = grant;
            a[3 * n + 2] = release;
            ++n;
        }
    }

    private static String lockName(Options o, long k) {
        return o.locks == 1 ? o.path : o.path + "/l" + k;
    }

    private static CuratorFramework connect(Options o, OperationCounter counter, AtomicLong trouble) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(o.connect)
            .sessionTimeoutMs(SESSION_TIMEOUT_MS)
            .connectionTimeoutMs(CONNECTION_TIMEOUT_MS)
            .retryPolicy(new ExponentialBackoffRetry(100, 3))
            .build();
        client.getZookeeperClient().setTracerDriver(counter);
        client.getConnectionStateListenable().addListener((c, state) -> {
            if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) trouble.incrementAndGet();
            if (state != ConnectionState.CONNECTED) System.err.println(PROGRAM + ": connection " + state);
        });
        client.start();
        if (!client.blockUntilConnected((int) Math.min(CONNECTION_TIMEOUT_MS, timeLeftMs()), TimeUnit.MILLISECONDS)) {
            client.close();
            return null;
        }
        return client;
    }

    /**
     * Unmeasured: one contended handoff (a second thread waits behind the main one) loads most
     * classes of the measured part, whose loading would otherwise count in its CPU time.
     */
    private static void warmUp(CuratorFramework client, String path) throws Exception {
        InterProcessMutex first = new InterProcessMutex(client, path);
        if (!first.acquire(timeLeftMs(), TimeUnit.MILLISECONDS)) throw new Stop("time", "the warm-up acquisition timed out");
        AtomicReference<Throwable> failed = new AtomicReference<>();
        CountDownLatch entered = new CountDownLatch(1);
        Thread second = new Thread(() -> {
            try {
                InterProcessMutex m = new InterProcessMutex(client, path);
                entered.countDown();
                if (!m.acquire(timeLeftMs(), TimeUnit.MILLISECONDS)) throw new Stop("time", "the warm-up acquisition timed out");
                m.release();
            } catch (Throwable e) {
                failed.set(e);
            }
        }, "warm-up");
        second.setDaemon(true);
        second.start();
        entered.await(timeLeftMs(), TimeUnit.MILLISECONDS);
        // The second thread's node exists once it lists the queue: wait for two children.
        for (int i = 0; i < 10_000 && client.getChildren().forPath(path).size() < 2; ++i) {
            checkDeadline("warming up");
            Thread.sleep(1);
        }
        first.release();
        second.join(timeLeftMs());
        if (second.isAlive()) throw new Stop("time", "the warm-up thread did not finish");
        if (failed.get() != null) throw new Stop("error", "warm-up: " + failed.get());
        deleteTree(client, path);
        procField("/proc/self/status", "VmRSS");
        bytesReceived(client);
        ManagementFactory.getThreadMXBean().getThreadCount();
    }

    private static int run(Options o) throws Exception {
        OperationCounter counter = new OperationCounter();
        AtomicLong trouble = new AtomicLong();
        CuratorFramework client = connect(o, counter, trouble);
        if (client == null) {
            System.err.println(PROGRAM + ": cannot connect to " + o.connect);
            return 2;
        }
        Thread[] threads = new Thread[(int) o.tasks];
        Holds[] holds = new Holds[(int) o.tasks];
        AtomicReference<String> error = new AtomicReference<>();
        int started = 0;
        String stop = null;
        StringBuilder part = new StringBuilder();
        try {
            warmUp(client, o.path + "-warmup");

            final long expected = o.durationMs > 0 ? 4096 : o.rounds;
            final AtomicIntegerArray inside = new AtomicIntegerArray((int) Math.min(o.locks, Integer.MAX_VALUE));
            final CountDownLatch entered = new CountDownLatch((int) o.tasks);
            final long troubleBefore = trouble.get();
            long packets0 = -1;
            for (int i = 0; i < 50 && packets0 < 0; ++i) packets0 = mntr(o.connect).getOrDefault("zk_packets_received", -1L);
            final long sent0 = mntrSent.get();
            Sampler sampler = new Sampler(o.connect);
            sampler.start();
            final long bytes0 = bytesReceived(client);
            final long ops0 = counter.operations.get();
            final long cpu0 = cpuNs();
            final long t0 = System.nanoTime();
            final long firstNs = t0;
            final long end = t0 + TimeUnit.MILLISECONDS.toNanos(o.durationMs);
            InterProcessMutex gate = null;
            if (o.gateMs > 0) {
                gate = new InterProcessMutex(client, o.path);
                if (!gate.acquire(timeLeftMs(), TimeUnit.MILLISECONDS)) throw new Stop("time", "the gate's acquisition timed out");
            }
            for (int t = 0; t < o.tasks; ++t) {
                // Threads enter --entry-per-s a second (as zkcoro-scale-bench's tasks): pacing, not synchronisation.
                long due = t0 + t * 1_000_000_000L / o.entryPerS;
                for (int i = 0; i < 1_000_000 && System.nanoTime() - due < 0; ++i) {
                    checkDeadline("starting the threads");
                    long ms = TimeUnit.NANOSECONDS.toMillis(due - System.nanoTime());
                    if (ms > 0) Thread.sleep(ms); else Thread.onSpinWait();
                }
                if (error.get() != null) break;
                final int index = t;
                holds[index] = new Holds(expected);
                Thread th = new Thread(() -> {
                    Holds h = holds[index];
                    InterProcessMutex own = o.locks == 1 ? new InterProcessMutex(client, o.path) : null;
                    Map<Long, InterProcessMutex> mine = o.locks == 1 ? null : new HashMap<>();
                    entered.countDown();
                    try {
                        for (long r = 0; error.get() == null; ++r) {
                            if (o.durationMs > 0 ? System.nanoTime() - end >= 0 : r >= o.rounds) break;
                            checkDeadline("waiting for the lock");
                            long k = o.locks == 1 ? 0 : ThreadLocalRandom.current().nextLong(o.locks);
                            InterProcessMutex m = own != null ? own
                                : mine.computeIfAbsent(k, key -> new InterProcessMutex(client, lockName(o, key)));
                            if (!m.acquire(timeLeftMs(), TimeUnit.MILLISECONDS)) throw new Stop("time", "acquire timed out (time limit)");
                            long granted = System.nanoTime();
                            boolean twice = inside.incrementAndGet((int) k) > 1;
                            inside.decrementAndGet((int) k);
                            long released = System.nanoTime();
                            m.release();
                            if (twice) throw new Stop("check", "two threads held one lock at once");
                            h.add(k, granted, released);
                        }
                    } catch (Stop e) {
                        error.compareAndSet(null, "reason=" + e.reason + " " + e.getMessage());
                    } catch (OutOfMemoryError e) {
                        error.compareAndSet(null, "reason=memory " + e);
                    } catch (Throwable e) {
                        error.compareAndSet(null, "reason=error " + e);
                    }
                }, "waiter-" + t);
                th.setDaemon(true);
                try {
                    th.start();
                } catch (OutOfMemoryError e) {  // "unable to create native thread": the thread limit or memory
                    error.compareAndSet(null, "reason=threads started=" + t + " of " + o.tasks + " " + e.getMessage());
                    break;
                }
                threads[index] = th;
                started = t + 1;
            }
            // The gate opens once every thread has entered (its InterProcessMutex made, about to
            // acquire) and --gate-ms has passed, as zkcoro-scale-bench's timer does.
            if (started == o.tasks && !entered.await(timeLeftMs(), TimeUnit.MILLISECONDS)) {
                error.compareAndSet(null, "reason=time the threads did not all enter within the time limit");
            }
            long rssEntered = procField("/proc/self/status", "VmRSS");
            int threadCount = ManagementFactory.getThreadMXBean().getThreadCount();
            long gateLateMs = 0;
            if (gate != null) {
                long open = t0 + TimeUnit.MILLISECONDS.toNanos(o.gateMs);
                gateLateMs = Math.max(0, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - open));
                for (int i = 0; i < 1_000_000 && System.nanoTime() - open < 0 && error.get() == null; ++i) {
                    Thread.sleep(Math.max(1, Math.min(timeLeftMs(), TimeUnit.NANOSECONDS.toMillis(open - System.nanoTime()))));
                }
                gate.release();
            }
            long giveUp = softDeadlineNs + TimeUnit.MILLISECONDS.toNanos(CLEANUP_GRACE_MS);
            int alive = 0;
            for (int t = 0; t < started; ++t) {
                long left = giveUp - System.nanoTime();
                if (left > 0) threads[t].join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                if (threads[t].isAlive()) ++alive;
            }
            long wallNs = System.nanoTime() - t0;
            long cpu = cpuNs() - cpu0;
            long ops = counter.operations.get() - ops0;
            long bytes1 = bytesReceived(client);
            sampler.finish();
            long packets1 = -1;
            for (int i = 0; i < 50 && packets1 < 0; ++i) packets1 = mntr(o.connect).getOrDefault("zk_packets_received", -1L);
            // Less the mntr commands sent since packets0's (the sampler's, and packets1's own).
            long serverPackets = packets0 >= 0 && packets1 >= 0 && !sampler.isAlive()
                ? packets1 - packets0 - (mntrSent.get() - sent0) : -1;
            long rss = procField("/proc/self/status", "VmRSS");
            if (alive > 0) error.compareAndSet(null, "reason=time " + alive + " threads still waiting after the time limit");
            if (trouble.get() != troubleBefore) error.compareAndSet(null, "reason=connection the connection was SUSPENDED or LOST");
            long acquisitions = 0;
            for (int t = 0; t < started; ++t) acquisitions += holds[t].n;
            long lastNs = firstNs + wallNs;
            part.append(String.format(Locale.ROOT,
                "PART id=%s tasks=%d rounds=%d locks=%d duration_ms=%d acquisitions=%d curator_ops=%d cpu_us=%.0f "
                    + "%s rss_kb=%d rss_kb_entered=%d wall_ms=%.1f server_packets=%d server_znodes=%d server_watches=%d threads=%d "
                    + "heap_max_mb=%d gate_late_ms=%d mono_first_ns=%d mono_last_ns=%d",
                o.id, o.tasks, o.durationMs > 0 ? 0 : o.rounds, o.locks, o.durationMs, acquisitions, ops, cpu / 1e3,
                bytes0 >= 0 && bytes1 >= 0 ? "bytes_in=" + (bytes1 - bytes0) : "bytes_in_unknown=1", rss, rssEntered, wallNs / 1e6, serverPackets, sampler.znodes, sampler.watches,
                threadCount, Runtime.getRuntime().maxMemory() >> 20, gateLateMs, firstNs, lastNs));
            if (o.durationMs == 0 && error.get() == null && acquisitions != o.tasks * o.rounds) {
                error.compareAndSet(null, "reason=check " + acquisitions + " acquisitions of " + o.tasks * o.rounds);
            }
            if (o.events != null) {
                try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Path.of(o.events)))) {
                    for (int t = 0; t < started; ++t) {
                        Holds h = holds[t];
                        for (int i = 0; i < h.n; ++i) out.print(h.a[3 * i] + " " + h.a[3 * i + 1] + " " + h.a[3 * i + 2] + "\n");
                    }
                    if (out.checkError()) throw new IOException("could not write " + o.events);
                }
            }
        } catch (Stop e) {
            error.compareAndSet(null, "reason=" + e.reason + " " + e.getMessage());
        } catch (OutOfMemoryError e) {
            error.compareAndSet(null, "reason=memory " + e);
        } finally {
            long minDeadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLEANUP_GRACE_MS);
            if (softDeadlineNs - minDeadline < 0) softDeadlineNs = minDeadline;
            if (error.get() == null) deleteTree(client, o.path);  // after a stop, threads may still be waiting
            client.close();
        }
        if (part.length() > 0) System.out.println(part);
        stop = error.get();
        if (stop != null) {
            System.out.println("STOP " + stop + " threads_started=" + started);
            return 1;
        }
        return 0;
    }

    private static void startWatchdog(long hardDeadlineNs, long limit) {
        BenchSupport.startWatchdog(hardDeadlineNs, () -> System.out.println(
            "STOP reason=time the watchdog halted the JVM " + HARD_GRACE_MS / 1000 + " s after the time limit of "
            + limit + " s"));
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
            System.err.print(USAGE);
            System.exit(2);
            return;
        }
        if (o == null) {
            System.out.print(USAGE);
            System.exit(0);
            return;
        }
        softDeadlineNs = t0 + TimeUnit.SECONDS.toNanos(o.timeLimit);
        startWatchdog(softDeadlineNs + TimeUnit.MILLISECONDS.toNanos(HARD_GRACE_MS), o.timeLimit);
        int rc;
        try {
            rc = o.checkClock ? checkClock() : run(o);
        } catch (Throwable e) {
            System.out.println("STOP reason=error " + e);
            e.printStackTrace(System.err);
            rc = 1;
        }
        System.out.flush();
        System.err.flush();
        System.exit(rc);
    }
}
