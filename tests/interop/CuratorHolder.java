// CuratorHolder: contends on a lock with Apache Curator's recipes and logs every hold, so that
// an interval checker can prove mutual exclusion between Curator and zkcoro processes.
//
//   java -cp "$(cat OUTDIR/classpath.txt)" CuratorHolder --connect 127.0.0.1:2181 --path /locks/x
//        --recipe mutex|read|write|semaphore [--leases N] --duration-ms D --hold-ms H
//        --log FILE --id NAME [--session-timeout-ms 4000] [--connection-timeout-ms 3000]
//        [--acquire-timeout-ms 2000] [--max-count 100000]
//        [--events FILE] [--fence-store FILE] [--control-store FILE] [--fence-tool PATH]
//        [--first-hold-ms N] [--stop-file FILE] [--retry-ms N] [--tolerate-errors]
//   java -cp ... CuratorHolder --participants --connect HOST:PORT --path /locks/x [--recipe R]
//
// Each hold appends one line "<id> <mode> <enter_ns> <exit_ns>" to FILE (mode X, R, W or S),
// written with a single write() on a file opened for appending, so several holders may share a
// file. enter_ns is taken after acquire() returned and exit_ns before release() is called: the
// logged interval lies inside the real hold. Both come from System.nanoTime(), which HotSpot
// on Linux reads from clock_gettime(CLOCK_MONOTONIC), the clock of std::chrono::steady_clock.
//
// Options for the fault suite (tests/fault), all optional:
//   --events FILE        appends "<nanoTime> <id> <kind> ..." lines, the format of zkcoro-holder:
//                        "session <sid> <server>" on every (re)connection, "expired <sid>" when a
//                        reconnection brings a new session, "enter <token> <sid>", "exit <token>",
//                        "lost <token> <sid>" (Curator reported LOST during the hold),
//                        "write <token> accepted|rejected", "error <what>".
//   --fence-store FILE   at the end of each mutex hold without LOST, writes the fencing token to
//                        this fence store with the fault-fence tool (--fence-tool PATH);
//   --control-store FILE and to this unchecked one (the negative control).
//                        Curator has no fencing token: ours is the lock node's czxid x 64, the
//                        scale of zkcoro's (czxid x 64 + in-process handoffs). The lock node's
//                        path comes from InterProcessMutex.getLockPath(), reached by a subclass.
//   --first-hold-ms N    the first hold lasts N ms instead of --hold-ms.
//   --stop-file FILE     stop acquiring once FILE exists.
//   --retry-ms N         Curator retries an operation for up to N ms (RetryUntilElapsed) instead
//                        of 4 quick attempts, so a leader election does not fail a release.
//   --tolerate-errors    an acquire or release that throws is logged as an "error" event and
//                        the loop goes on (after 200 ms) instead of ending the holder.
//
// stdout: "acquired=<count>" at the end (participants mode: one node path per line).
// stderr: connection-state changes and warnings. Exit 0 on success, 2 on error or bad usage.

import java.io.File;
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
import org.apache.curator.retry.RetryUntilElapsed;
import org.apache.zookeeper.data.Stat;
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
        + "         [--events FILE] [--fence-store FILE] [--control-store FILE] [--fence-tool PATH]\n"
        + "         [--first-hold-ms N] [--stop-file FILE] [--retry-ms N] [--tolerate-errors]\n"
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
    private String eventsFile;
    private String fenceStore;
    private String controlStore;
    private String fenceTool;
    private long firstHoldMs = -1;
    private String stopFile;
    private int retryMs = 0;
    private boolean tolerateErrors;

    // The events file (fault suite), shared by the main thread and Curator's listener thread.
    private OutputStream events;
    // Bumped on every LOST: Curator's own verdict that the session may be gone.
    private final AtomicLong lostCount = new AtomicLong();
    // The session of the last (re)connection, to tell a reconnection from a new session.
    private long lastSessionId = 0;

    // InterProcessMutex keeps its lock node's path to itself; a subclass may read it.
    private static final class FencedMutex extends InterProcessMutex {
        FencedMutex(CuratorFramework client, String path) { super(client, path); }
        String lockNodePath() { return getLockPath(); }
    }

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
            if (a.equals("--tolerate-errors")) { tolerateErrors = true; continue; }
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
                case "--events": eventsFile = val; break;
                case "--fence-store": fenceStore = val; break;
                case "--control-store": controlStore = val; break;
                case "--fence-tool": fenceTool = val; break;
                case "--first-hold-ms": firstHoldMs = number(k, val, 0); break;
                case "--stop-file": stopFile = val; break;
                case "--retry-ms": retryMs = (int) number(k, val, 1); break;
                default: throw new UsageError("unknown option " + k);
            }
        }
        if (connect == null) throw new UsageError("--connect is required");
        if (path == null || !path.startsWith("/")) throw new UsageError("--path /absolute/path is required");
        if (!(recipe.equals("mutex") || recipe.equals("read") || recipe.equals("write")
              || recipe.equals("semaphore"))) {
            throw new UsageError("--recipe must be mutex, read, write or semaphore, not " + recipe);
        }
        if ((fenceStore != null || controlStore != null) && fenceTool == null) {
            throw new UsageError("--fence-store and --control-store need --fence-tool PATH");
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
            .retryPolicy(retryMs > 0 ? new RetryUntilElapsed(retryMs, 200) : new ExponentialBackoffRetry(100, 4, 1000))
            .build();
        client.getConnectionStateListenable().addListener((c, state) -> {
            if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) {
                connectionTrouble.incrementAndGet();
            }
            if (state == ConnectionState.LOST) lostCount.incrementAndGet();
            if (state == ConnectionState.CONNECTED || state == ConnectionState.RECONNECTED) noteSession(c);
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

    // One event line "<nanoTime> <id> <what>" with a single write (fault suite); none without --events.
    private synchronized void event(String what) {
        if (events == null) return;
        try {
            events.write((System.nanoTime() + " " + id + " " + what + "\n").getBytes(StandardCharsets.UTF_8));
            events.flush();
        } catch (IOException e) {
            System.err.println("CuratorHolder[" + id + "]: cannot write an event: " + e);
        }
    }

    // Called on Curator's listener thread at every CONNECTED/RECONNECTED.
    private synchronized void noteSession(CuratorFramework c) {
        long sid;
        String server = "?";
        try {
            org.apache.zookeeper.ZooKeeper zk = c.getZookeeperClient().getZooKeeper();
            sid = zk.getSessionId();
            // ZooKeeper's toString() names the server as "remoteserver:host/ip:port".
            String s = zk.toString();
            int at = s.indexOf("remoteserver:");
            if (at >= 0) {
                String rest = s.substring(at + 13).split(" ")[0];
                server = rest.substring(rest.indexOf('/') + 1);
            }
        } catch (Exception e) {
            return;
        }
        if (lastSessionId != 0 && sid != lastSessionId) event("expired 0x" + Long.toHexString(lastSessionId));
        lastSessionId = sid;
        event("session 0x" + Long.toHexString(sid) + " " + server);
    }

    private boolean stopRequested() {
        return stopFile != null && new File(stopFile).exists();
    }

    // Runs the fault-fence tool; returns its verdict ("accepted" or "rejected").
    private String fence(String store, long token, boolean check) throws Exception {
        ProcessBuilder pb = check
            ? new ProcessBuilder(fenceTool, "write", store, id, Long.toString(token))
            : new ProcessBuilder(fenceTool, "write", store, id, Long.toString(token), "--no-check");
        pb.redirectErrorStream(true);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        if (!p.waitFor(10, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IOException("fault-fence failed: " + out);
        }
        return out;
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
        long holds = 0;
        boolean releaseFailed = false;
        if (eventsFile != null) events = new FileOutputStream(eventsFile, true);
        try (OutputStream log = new FileOutputStream(logFile, true);
             CuratorFramework client = connect()) {
            System.err.println("CuratorHolder[" + id + "]: ready after "
                + ManagementFactory.getRuntimeMXBean().getUptime() + " ms of JVM uptime");
            InterProcessLock lock = null;
            FencedMutex mutex = null;
            InterProcessSemaphoreV2 sem = null;
            switch (recipe) {
                case "read": lock = new InterProcessReadWriteLock(client, path).readLock(); break;
                case "write": lock = new InterProcessReadWriteLock(client, path).writeLock(); break;
                case "semaphore": sem = new InterProcessSemaphoreV2(client, path, leases); break;
                default: mutex = new FencedMutex(client, path); lock = mutex; break;
            }
            final long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(durationMs);
            while (count < maxCount && !stopRequested()) {
                long remainingMs = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                if (remainingMs <= 0) break;
                long waitMs = Math.min(acquireTimeoutMs, remainingMs);
                Lease lease = null;
                try {
                    if (sem != null) {
                        lease = sem.acquire(waitMs, TimeUnit.MILLISECONDS);
                        if (lease == null) continue; // timed out: retry while time remains
                    } else if (!lock.acquire(waitMs, TimeUnit.MILLISECONDS)) {
                        continue;
                    }
                } catch (Exception e) {
                    if (!tolerateErrors) throw e;
                    // A fault may break the connection while we wait: note it and retry.
                    event("error acquire: " + e.toString().replace('\n', ' '));
                    Thread.sleep(200);
                    continue;
                }
                ++holds;
                final long trouble = connectionTrouble.get();
                final long lostBefore = lostCount.get();
                long token = -1;
                if (mutex != null && (fenceStore != null || controlStore != null || events != null)) {
                    try {
                        Stat st = client.checkExists().forPath(mutex.lockNodePath());
                        if (st != null) token = st.getCzxid() * 64;
                    } catch (Exception e) {
                        event("error token: " + e.toString().replace('\n', ' '));
                    }
                }
                final long sid = lastSessionId;
                final long enter = System.nanoTime();
                event("enter " + token + " 0x" + Long.toHexString(sid));
                long exit;
                try {
                    long hold = holds == 1 && firstHoldMs >= 0 ? firstHoldMs : holdMs;
                    if (hold > 0) Thread.sleep(hold);
                    if (lostCount.get() != lostBefore) {
                        event("lost " + token + " 0x" + Long.toHexString(sid));
                    } else if (token >= 0) {
                        // The control store first: the suite may act once the fence store has it.
                        if (controlStore != null) fence(controlStore, token, false);
                        if (fenceStore != null) event("write " + token + " " + fence(fenceStore, token, true));
                    }
                } finally {
                    exit = System.nanoTime();
                    event("exit " + token);
                    try {
                        if (sem != null) sem.returnLease(lease); else lock.release();
                    } catch (Exception e) {
                        // Curator gives up after its retries; the node may linger until the
                        // session expires. The hold itself happened, so it is still logged.
                        System.err.println("CuratorHolder[" + id + "]: release failed: " + e);
                        event("error release: " + e.toString().replace('\n', ' '));
                        if (!tolerateErrors) releaseFailed = true;
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
        } finally {
            if (events != null) events.close();
        }
        if (suspect > 0) System.err.println("CuratorHolder[" + id + "]: " + suspect + " hold(s) overlapped connection trouble");
        System.out.println("acquired=" + count);
        return releaseFailed ? 2 : 0;
    }
}
