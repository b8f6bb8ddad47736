// CuratorTwoLocks: one Curator session takes a first InterProcessMutex and then, holding it, a
// second one, so that it and a zkcoro-two-locks taking them in the opposite order deadlock.
//
//   java -cp "$(cat OUTDIR/classpath.txt)" CuratorTwoLocks --connect HOST:PORT --first /a
//        --second /b [--data TEXT] [--wait-ms 60000] [--second-after-line yes]
//
// --second-after-line yes: after the first lock is held, reads a line from stdin before asking
// for the second.
//
// --data sets the client's default node data (Curator's own default is the local IP address).
// stdout: "holding FIRST", then "holding SECOND" or "timed out SECOND". Runs until SIGTERM, then
// closes its session (its nodes vanish at once). Exit 2 on error or bad usage.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorTwoLocks {
    public static void main(String[] args) throws Exception {
        String connect = null, first = null, second = null, data = null;
        long waitMs = 60000;
        boolean afterLine = false;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--connect": connect = args[i + 1]; break;
                case "--first": first = args[i + 1]; break;
                case "--second": second = args[i + 1]; break;
                case "--data": data = args[i + 1]; break;
                case "--wait-ms": waitMs = Long.parseLong(args[i + 1]); break;
                case "--second-after-line": afterLine = args[i + 1].equals("yes"); break;
                default:
                    System.err.println("CuratorTwoLocks: unknown option " + args[i]);
                    System.exit(2);
            }
        }
        if (connect == null || first == null || second == null || args.length % 2 != 0) {
            System.err.println("usage: CuratorTwoLocks --connect HOST:PORT --first /a --second /b [--data TEXT] [--wait-ms N]");
            System.exit(2);
        }
        CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder().connectString(connect)
                .sessionTimeoutMs(4000).connectionTimeoutMs(3000).retryPolicy(new ExponentialBackoffRetry(100, 3));
        if (data != null)
            b = b.defaultData(data.getBytes(StandardCharsets.UTF_8));
        final CuratorFramework client = b.build();
        final CountDownLatch stop = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            client.close();  // ends the session: the lock nodes vanish at once
            stop.countDown();
        }));
        try {
            client.start();
            if (!client.blockUntilConnected(10, TimeUnit.SECONDS))
                throw new IllegalStateException("not connected to " + connect + " within 10 s");
            InterProcessMutex a = new InterProcessMutex(client, first);
            InterProcessMutex c = new InterProcessMutex(client, second);
            a.acquire();
            System.out.println("holding " + first);
            System.out.flush();
            if (afterLine)
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            boolean got = c.acquire(waitMs, TimeUnit.MILLISECONDS);
            System.out.println((got ? "holding " : "timed out ") + second);
            System.out.flush();
            stop.await();
        } catch (Exception e) {
            System.err.println("CuratorTwoLocks: " + e);
            System.exit(2);
        }
    }
}
