package quiver.conformance;

import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * DefaultLitePullConsumer in subscribe mode, auto-commit on (its default): polls
 * {@code topic} by tag {@code expr} or {@code sql} until the stopper says (see
 * {@link Stopper}), then commits and shuts down.
 */
final class LitePull {
    private LitePull() {
    }

    static void run(Options options) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(options.text("group"));
        consumer.setNamesrvAddr(options.text("namesrv"));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(options.text("topic"), Consumers.selector(options));
        if (!Consumers.start(consumer::start, consumer::shutdown)) {
            return;
        }
        Report.event("started");
        Stopper stopper = new Stopper(options);
        stopper.await(() -> {
            List<MessageExt> batch = consumer.poll(200);
            for (MessageExt msg : batch) {
                Report.message("message", msg);
                stopper.received.incrementAndGet();
            }
        });
        consumer.commitSync();
        consumer.shutdown();
        Report.event("done", "received", stopper.received.get());
    }
}
