// CuratorElect: Curator's side of the election, revocation and fencing interop tests (the
// counterpart of zkcoro_elect.cpp). One mode per run:
//
//   java -cp CP CuratorElect latch    --connect C --path P --id ID --events FILE [--duration-ms D]
//   java -cp CP CuratorElect selector --connect C --path P --id ID --events FILE [--duration-ms D]
//       Takes part in a LeaderLatch / LeaderSelector (autoRequeue) election until killed (or D ms,
//       default 120000). Appends "<nanoTime> <id> gained" when it becomes leader and
//       "<nanoTime> <id> lost" when it stops being leader, one write each (System.nanoTime() is
//       CLOCK_MONOTONIC on Linux, the clock of zkcoro-elect).
//   java -cp CP CuratorElect hold --connect C --path P [--revocable] [--wait-ms N]
//       InterProcessMutex (makeRevocable with a listener when --revocable): acquires (at most
//       30 s), prints "held <node>", waits at most N ms (default 20000) for the listener, prints
//       "revoked" or "not-revoked", releases (on the acquiring thread) and exits 0.
//   java -cp CP CuratorElect revoke --connect C --node NODE      Revoker.attemptRevoke(NODE)
//
// Common option: --session-timeout-ms (default 2000). Exit 2 on error or bad usage.

import java.io.FileOutputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorElect {
    private final Map<String, String> opt = new HashMap<>();
    private boolean revocable;
    private OutputStream events;

    // InterProcessMutex keeps its lock node's path to itself; a subclass may read it.
    private static final class PathMutex extends InterProcessMutex {
        PathMutex(CuratorFramework client, String path) { super(client, path); }
        String lockNodePath() { return getLockPath(); }
    }

    public static void main(String[] args) {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        if (System.getProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn") == null) {
            System.setProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn", "error");
        }
        int rc;
        try {
            rc = new CuratorElect().run(args);
        } catch (IllegalArgumentException e) {
            System.err.println("CuratorElect: " + e.getMessage() + " (see the comment at the top of CuratorElect.java)");
            rc = 2;
        } catch (Throwable e) {
            System.err.println("CuratorElect: error: " + e);
            e.printStackTrace(System.err);
            rc = 2;
        }
        System.out.flush();
        System.exit(rc);
    }

    private String get(String key) {
        String v = opt.get(key);
        if (v == null || v.isEmpty()) throw new IllegalArgumentException("missing " + key);
        return v;
    }

    private long num(String key, long dflt) {
        String v = opt.get(key);
        if (v == null) return dflt;
        try {
            long n = Long.parseLong(v);
            if (n < 0) throw new NumberFormatException();
            return n;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + " needs a non-negative integer, got '" + v + "'");
        }
    }

    private synchronized void event(String id, String what) {
        try {
            events.write((System.nanoTime() + " " + id + " " + what + "\n").getBytes(StandardCharsets.UTF_8));
            events.flush();
        } catch (Exception e) {
            System.err.println("CuratorElect: cannot write an event: " + e);
        }
    }

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private int run(String[] args) throws Exception {
        if (args.length < 1) throw new IllegalArgumentException("a mode is required");
        String mode = args[0];
        for (int i = 1; i < args.length; ++i) {
            if (args[i].equals("--revocable")) { revocable = true; continue; }
            if (!args[i].startsWith("--") || i + 1 >= args.length) throw new IllegalArgumentException("unexpected argument " + args[i]);
            opt.put(args[i], args[++i]);
        }
        int sessionMs = (int) num("--session-timeout-ms", 2000);
        try (CuratorFramework client = CuratorFrameworkFactory.builder()
                 .connectString(get("--connect")).sessionTimeoutMs(sessionMs).connectionTimeoutMs(Math.min(3000, sessionMs))
                 .retryPolicy(new ExponentialBackoffRetry(100, 4, 1000)).build()) {
            client.start();
            if (!client.blockUntilConnected(10, TimeUnit.SECONDS)) throw new Exception("could not connect");
            switch (mode) {
                case "latch": return latch(client);
                case "selector": return selector(client);
                case "hold": return hold(client);
                case "revoke":
                    Revoker.attemptRevoke(client, get("--node"));
                    return 0;
                default: throw new IllegalArgumentException("unknown mode " + mode);
            }
        }
    }

    private int latch(CuratorFramework client) throws Exception {
        final String id = get("--id");
        events = new FileOutputStream(get("--events"), true);
        try (LeaderLatch latch = new LeaderLatch(client, get("--path"), id)) {
            latch.addListener(new LeaderLatchListener() {
                @Override public void isLeader() { event(id, "gained"); }
                @Override public void notLeader() { event(id, "lost"); }
            });
            latch.start();
            Thread.sleep(num("--duration-ms", 120000));
        }
        return 0;
    }

    private int selector(CuratorFramework client) throws Exception {
        final String id = get("--id");
        events = new FileOutputStream(get("--events"), true);
        final long durationMs = num("--duration-ms", 120000);
        try (LeaderSelector sel = new LeaderSelector(client, get("--path"), new LeaderSelectorListenerAdapter() {
                @Override public void takeLeadership(CuratorFramework c) throws Exception {
                    event(id, "gained");
                    try {
                        Thread.sleep(durationMs);  // interrupted when leadership is lost
                    } finally {
                        event(id, "lost");
                    }
                }
            })) {
            sel.setId(id);
            sel.autoRequeue();
            sel.start();
            Thread.sleep(durationMs);
        }
        return 0;
    }

    private int hold(CuratorFramework client) throws Exception {
        PathMutex m = new PathMutex(client, get("--path"));
        final CountDownLatch revoked = new CountDownLatch(1);
        if (revocable) m.makeRevocable(lock -> revoked.countDown());
        if (!m.acquire(30, TimeUnit.SECONDS)) throw new Exception("not acquired within 30 s");
        say("held " + m.lockNodePath());
        boolean r = revoked.await(num("--wait-ms", 20000), TimeUnit.MILLISECONDS);
        say(r ? "revoked" : "not-revoked");
        m.release();
        return 0;
    }
}
