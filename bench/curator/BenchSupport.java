// What the Curator benchmarks (CuratorBench, CuratorScale) share: each extends this class, so its
// static members are theirs by name. The command line's checks, the JVM's logging, the watchdog,
// the process's CPU clock and the deletion of a tree of nodes.
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.zookeeper.KeeperException;

abstract class BenchSupport {
    /** The program's name in messages: each benchmark sets it first thing in main. */
    static String program = "curator-bench";

    /** Bad command line: exit 2 with the usage. */
    static final class UsageError extends Exception {
        private static final long serialVersionUID = 1L;
        UsageError(String msg) { super(msg); }
    }

    /** Before any logger exists: slf4j-simple at warn (to stderr), unless the caller chose. */
    static void quietLogs() {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        // ZooKeeper 3.8 warns with a stack trace on every orderly close() of a session.
        if (System.getProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn") == null) {
            System.setProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn", "error");
        }
    }

    /** `v` as a decimal integer in [lo, hi], else a UsageError naming the option. */
    static long integer(String name, String v, long lo, long hi) throws UsageError {
        long x;
        try {
            x = Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new UsageError(name + ": expected an integer in [" + lo + ", " + hi + "], got \"" + v + "\"");
        }
        if (x < lo || x > hi) {
            throw new UsageError(name + ": expected an integer in [" + lo + ", " + hi + "], got \"" + v + "\"");
        }
        return x;
    }

    /** Accepts a loopback HOST:PORT (127.0.0.0/8, [::1] or ::1, localhost); returns it for Curator. */
    static String loopbackOnly(String s) throws UsageError {
        String why = "--connect: \"" + s + "\" is not a loopback HOST:PORT (127.0.0.0/8, [::1], localhost): "
            + "this benchmark runs against a local server only";
        int colon = s.lastIndexOf(':');
        if (s.contains(",") || s.contains("/") || colon <= 0 || colon + 1 == s.length()) {
            throw new UsageError("--connect: expected one HOST:PORT, got \"" + s + "\"");
        }
        String host = s.substring(0, colon);
        long port = integer("--connect port", s.substring(colon + 1), 1, 65535);
        if (host.equals("localhost")) return "127.0.0.1:" + port;
        if (host.startsWith("[") && host.endsWith("]")) host = host.substring(1, host.length() - 1);
        if (isIpv4Loopback(host)) return host + ":" + port;
        if (isIpv6Loopback(host)) return "[::1]:" + port;
        throw new UsageError(why);
    }

    private static boolean isIpv4Loopback(String h) {
        String[] parts = h.split("\\.", -1);
        if (parts.length != 4) return false;
        for (String p : parts) {
            if (p.isEmpty() || p.length() > 3 || !p.chars().allMatch(c -> c >= '0' && c <= '9')) return false;
            if (Integer.parseInt(p) > 255) return false;
        }
        return Integer.parseInt(parts[0]) == 127;
    }

    /** ::1 in any spelling (0:0:0:0:0:0:0:1, ::0:1, ...), checked textually: no name lookup. */
    private static boolean isIpv6Loopback(String h) {
        if (!h.contains(":") || !h.chars().allMatch(c -> c == ':' || Character.digit(c, 16) >= 0)) return false;
        int dbl = h.indexOf("::");
        if (dbl >= 0 && h.indexOf("::", dbl + 1) >= 0) return false;
        List<String> groups = new ArrayList<>();
        if (dbl >= 0) {
            String left = h.substring(0, dbl);
            String right = h.substring(dbl + 2);
            List<String> l = left.isEmpty() ? List.of() : Arrays.asList(left.split(":", -1));
            List<String> r = right.isEmpty() ? List.of() : Arrays.asList(right.split(":", -1));
            if (l.size() + r.size() > 7) return false;
            groups.addAll(l);
            for (int i = l.size() + r.size(); i < 8; ++i) groups.add("0");
            groups.addAll(r);
        } else {
            groups.addAll(Arrays.asList(h.split(":", -1)));
        }
        if (groups.size() != 8) return false;
        for (int i = 0; i < 8; ++i) {
            String g = groups.get(i);
            if (g.isEmpty() || g.length() > 4) return false;
            if (Integer.parseInt(g, 16) != (i == 7 ? 1 : 0)) return false;
        }
        return true;
    }

    /**
     * A daemon thread that, once System.nanoTime() passes hardDeadlineNs, runs `report` (what to
     * print) and halts the JVM with status 3: a run that hangs past its time limit still ends.
     */
    static void startWatchdog(long hardDeadlineNs, Runnable report) {
        Thread t = new Thread(() -> {
            for (int i = 0; i < 1_000_000; ++i) {
                long left = hardDeadlineNs - System.nanoTime();
                if (left <= 0) break;
                try {
                    Thread.sleep(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                } catch (InterruptedException e) {
                    return;
                }
            }
            report.run();
            System.out.flush();
            System.err.flush();
            Runtime.getRuntime().halt(3);
        }, "watchdog");
        t.setDaemon(true);
        t.start();
    }

    private static final com.sun.management.OperatingSystemMXBean OS =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    /** CPU time of the whole JVM (every thread: the JIT's and the GC's too), in ns. */
    static long cpuNs() {
        return OS.getProcessCpuTime();
    }

    /** Deletes `path` and everything under it; reports, never throws. */
    static void deleteTree(CuratorFramework client, String path) {
        try {
            client.delete().deletingChildrenIfNeeded().forPath(path);
        } catch (KeeperException.NoNodeException e) {
            // never made, or the server removed the empty container already
        } catch (Exception e) {
            System.err.println(program + ": warning: deleting " + path + ": " + e);
        }
    }
}
