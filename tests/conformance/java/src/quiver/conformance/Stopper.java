package quiver.conformance;

import java.io.IOException;
import java.io.InputStream;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * When a consuming scenario ends: once {@code expect} messages arrived and {@code linger} ms
 * more passed without changing that (so a duplicate or a message that should not come is
 * seen), or, with {@code expect=0}, when the test closes stdin; never later than
 * {@code timeout} ms.
 */
final class Stopper {
    final AtomicInteger received = new AtomicInteger();
    private final int expect;
    private final long linger;
    private final long deadline;
    private volatile boolean stdinClosed;

    Stopper(Options options) {
        expect = options.number("expect", 0);
        linger = options.number("linger", 1000);
        deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(options.number("timeout", 60000));
        if (expect == 0) {
            Thread reader = new Thread(() -> {
                InputStream in = System.in;
                try {
                    while (in.read() >= 0) {
                        continue;
                    }
                } catch (IOException ignored) {
                    // A closed stdin ends the scenario as EOF does.
                }
                stdinClosed = true;
            }, "stdin-watch");
            reader.setDaemon(true);
            reader.start();
        }
    }

    /** Wait for the end; true if it came as asked, false on the timeout. */
    boolean await(Runnable tick) throws InterruptedException {
        long reachedAt = 0;
        int reachedCount = -1;
        while (System.nanoTime() < deadline) {
            if (tick != null) {
                tick.run();
            }
            if (expect == 0 ? stdinClosed : received.get() >= expect) {
                if (expect == 0) {
                    return true;
                }
                if (reachedCount != received.get()) {
                    reachedCount = received.get();
                    reachedAt = System.nanoTime();
                } else if (System.nanoTime() - reachedAt >= TimeUnit.MILLISECONDS.toNanos(linger)) {
                    return true;
                }
            }
            Thread.sleep(50);
        }
        Report.event("timeout", "received", received.get());
        return false;
    }
}
