// CuratorHolder: contends on a lock with Apache Curator's recipes and logs every hold, so that
// an interval checker can prove mutual exclusion between Curator and zkcoro processes.
//
//   java -cp "$(cat OUTDIR/classpath.txt)" CuratorHolder --connect 127.0.0.1:2181 --path /locks/x
//        --recipe mutex|read|write|semaphore [--leases N] --duration-ms D --hold-ms H
//        --log FILE --id NAME [--session-timeout-ms 4000] [--connection-timeout-ms 3000]
//        [--acquire-timeout-ms 2000] [--max-count 100000]
//   java -cp ... CuratorHolder --participants --connect HOST:PORT --path /locks/x [--recipe R]
//
// Each hold appends one line "<id> <mode> <enter_ns> <exit_ns>" to FILE (mode X, R, W or S),
// written with a single write() on a file opened for appending, so several holders may share a
// file. enter_ns is taken after acquire() returned and exit_ns before release() is called: the
// logged interval lies inside the real hold. Both come from System.nanoTime(), which HotSpot
// on Linux reads from clock_gettime(CLOCK_MONOTONIC), the clock of std::chrono::steady_clock.
//
// stdout: "acquired=<count>" at the end (participants mode: one node path per line).
// stderr: connection-state changes and warnings. Exit 0 on success, 2 on error or bad usage.

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;

public final class CuratorHolder {
    private static final class UsageError extends Exception {
        UsageError(String msg) { super(msg); }
    }

    private static final String USAGE =
        "usage: CuratorHolder --connect HOST:PORT --path /locks/x --recipe mutex|read|write|semaphore\n"
        + "         [--leases N] --duration-ms D --hold-ms H --log FILE --id NAME\n"
        + "         [--session-timeout-ms 4000] [--connection-timeout-ms 3000]\n"
        + "         [--acquire-timeout-ms 2000] [--max-count 100000]\n"
        + "       CuratorHolder --participants --connect HOST:PORT --path /locks/x [--recipe R]";

    // Options
    private String connect;
    private String path;
    private String recipe = "mutex";
    private int leases = 1;
    private long durationMs = -1;
    private long holdMs = -1;
    private String logFile;
    private String id;
    private int sessionTimeoutMs = 4000;
    private int connectionTimeoutMs = 3000;
    private long acquireTimeoutMs = 2000;
    private long maxCount = 100000;
    private boolean participants;

    // Bumped on every SUSPENDED/LOST: a hold during which it changed may not have been exclusive.
    private final AtomicLong connectionTrouble = new AtomicLong();

    public static void main(String[] args) {
        // Quiet slf4j-simple unless the caller asked otherwise (it logs to stderr).
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        // ZooKeeper 3.8 warns with a stack trace on every orderly close() of a session.
        if (System.getProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn") == null) {
            System.setProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn", "error");
        }
        CuratorHolder h = new CuratorHolder();
        int rc;
        try {
            h.parse(args);
            rc = h.participants ? h.runParticipants() : h.runHolder();
        } catch (UsageError e) {
            System.err.println("CuratorHolder: " + e.getMessage());
            System.err.println(USAGE);
            rc = 2;
        } catch (Throwable e) {
            System.err.println("CuratorHolder: error: " + e);
            e.printStackTrace(System.err);
            rc = 2;
        }
        System.out.flush();
        System.exit(rc);
    }

    private void parse(String[] args) throws UsageError {
        Map<String, String> v = new HashMap<>();
        for (int i = 0; i < args.length; ++i) {
            String a = args[i];
            if (a.equals("--participants")) { participants = true; continue; }
            if (a.equals("--help") || a.equals("-h")) throw new UsageError("help requested");
            if (!a.startsWith("--")) throw new UsageError("unexpected argument: " + a);
            String key = a;
            String val;
            int eq = a.indexOf('=');
            if (eq > 0) {
                key = a.substring(0, eq);
                val = a.substring(eq + 1);
            } else {
                if (i + 1 >= args.length) throw new UsageError("missing value for " + a);
                val = args[++i];
            }
            v.put(key, val);
        }
        for (Map.Entry<String, String> e : v.entrySet()) {
            String k = e.getKey();
            String val = e.getValue();
            switch (k) {
                case "--connect": connect = val; break;
                case "--path": path = val; break;
                case "--recipe": recipe = val; break;
                case "--leases": leases = (int) number(k, val, 1); break;
                case "--duration-ms": durationMs = number(k, val, 0); break;
                case "--hold-ms": holdMs = number(k, val, 0); break;
                case "--log": logFile = val; break;
                case "--id": id = val; break;
                case "--session-timeout-ms": sessionTimeoutMs = (int) number(k, val, 1); break;
                case "--connection-timeout-ms": connectionTimeoutMs = (int) number(k, val, 1); break;
                case "--acquire-timeout-ms": acquireTimeoutMs = number(k, val, 1); break;
                case "--max-count": maxCount = number(k, val, 1); break;
                default: throw new UsageError("unknown option " + k);
            }
        }
        if (connect == null) throw new UsageError("--connect is required");
        if (path == null || !path.startsWith("/")) throw new UsageError("--path /absolute/path is required");
        if (!(recipe.equals("mutex") || recipe.equals("read") || recipe.equals("write")
              || recipe.equals("semaphore"))) {
            throw new UsageError("--recipe must be mutex, read, write or semaphore, not " + recipe);
        }
        if (participants) return;
        if (durationMs < 0) throw new UsageError("--duration-ms is required");
        if (holdMs < 0) throw new UsageError("--hold-ms is required");
        if (logFile == null) throw new UsageError("--log is required");
        if (id == null || id.isEmpty() || id.chars().anyMatch(Character::isWhitespace)) {
            throw new UsageError("--id NAME (non-empty, no whitespace) is required");
        }
    }

    private static long number(String key, String val, long min) throws UsageError {
        long n;
        try {
            n = Long.parseLong(val);
        } catch (NumberFormatException e) {
            throw new UsageError(key + " needs an integer, got '" + val + "'");
        }
        if (n < min || n > Integer.MAX_VALUE) throw new UsageError(key + " out of range: " + val);
        return n;
    }

    private CuratorFramework connect() throws Exception {
        // Bounded retries: 4 attempts, 100 ms base backoff, at most 1 s between attempts.
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(connect)
            .sessionTimeoutMs(sessionTimeoutMs)
            .connectionTimeoutMs(connectionTimeoutMs)
            .retryPolicy(new ExponentialBackoffRetry(100, 4, 1000))
            .build();
        client.getConnectionStateListenable().addListener((c, state) -> {
            if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) {
                connectionTrouble.incrementAndGet();
            }
            System.err.println("CuratorHolder[" + (id == null ? "-" : id) + "]: connection " + state);
        });
        client.start();
        if (!client.blockUntilConnected(Math.max(connectionTimeoutMs, sessionTimeoutMs), TimeUnit.MILLISECONDS)) {
            client.close();
            throw new IOException("could not connect to " + connect);
        }
        return client;
    }

    private int runParticipants() throws Exception {
        try (CuratorFramework client = connect()) {
            Collection<String> nodes;
            try {
                switch (recipe) {
                    case "read": nodes = new InterProcessReadWriteLock(client, path).readLock().getParticipantNodes(); break;
                    case "write": nodes = new InterProcessReadWriteLock(client, path).writeLock().getParticipantNodes(); break;
                    case "semaphore": nodes = new InterProcessSemaphoreV2(client, path, Math.max(leases, 1)).getParticipantNodes(); break;
                    default: nodes = new InterProcessMutex(client, path).getParticipantNodes(); break;
                }
            } catch (KeeperException.NoNodeException e) {
                nodes = java.util.List.of(); // no parent: nobody participates
            }
            for (String n : nodes) System.out.println(n);
        }
        return 0;
    }

    private int runHolder() throws Exception {
        final char mode;
        switch (recipe) {
            case "read": mode = 'R'; break;
            case "write": mode = 'W'; break;
            case "semaphore": mode = 'S'; break;
            default: mode = 'X'; break;
        }
        long count = 0;
        long suspect = 0;
        boolean releaseFailed = false;
        try (OutputStream log = new FileOutputStream(logFile, true);
             CuratorFramework client = connect()) {
            System.err.println("CuratorHolder[" + id + "]: ready after "
                + ManagementFactory.getRuntimeMXBean().getUptime() + " ms of JVM uptime");
            InterProcessLock lock = null;
            InterProcessSemaphoreV2 sem = null;
            switch (recipe) {
                case "read": lock = new InterProcessReadWriteLock(client, path).readLock(); break;
                case "write": lock = new InterProcessReadWriteLock(client, path).writeLock(); break;
                case "semaphore": sem = new InterProcessSemaphoreV2(client, path, leases); break;
                default: lock = new InterProcessMutex(client, path); break;
            }
            final long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(durationMs);
            while (count < maxCount) {
                long remainingMs = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                if (remainingMs <= 0) break;
                long waitMs = Math.min(acquireTimeoutMs, remainingMs);
                Lease lease = null;
                if (sem != null) {
                    lease = sem.acquire(waitMs, TimeUnit.MILLISECONDS);
                    if (lease == null) continue; // timed out: retry while time remains
                } else if (!lock.acquire(waitMs, TimeUnit.MILLISECONDS)) {
                    continue;
                }
                final long trouble = connectionTrouble.get();
                final long enter = System.nanoTime();
                long exit;
                try {
                    if (holdMs > 0) Thread.sleep(holdMs);
                } finally {
                    exit = System.nanoTime();
                    try {
                        if (sem != null) sem.returnLease(lease); else lock.release();
                    } catch (Exception e) {
                        // Curator gives up after its retries; the node may linger until the
                        // session expires. The hold itself happened, so it is still logged.
                        releaseFailed = true;
                        System.err.println("CuratorHolder[" + id + "]: release failed: " + e);
                    }
                }
                if (connectionTrouble.get() != trouble) {
                    ++suspect;
                    System.err.println("CuratorHolder[" + id + "]: warning: connection trouble during hold "
                        + enter + ".." + exit + " (exclusion not guaranteed for it)");
                }
                String line = id + " " + mode + " " + enter + " " + exit + "\n";
                log.write(line.getBytes(StandardCharsets.UTF_8)); // one write(2), O_APPEND
                log.flush();
                ++count;
                if (releaseFailed) break;
            }
        }
        if (suspect > 0) System.err.println("CuratorHolder[" + id + "]: " + suspect + " hold(s) overlapped connection trouble");
        System.out.println("acquired=" + count);
        return releaseFailed ? 2 : 0;
    }
}
