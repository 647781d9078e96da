package quiver.conformance;

import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.exception.MQClientException;

/** What the consuming scenarios share: the subscription they ask for, and how they start. */
final class Consumers {
    private Consumers() {
    }

    /** A consumer's start(): the push and the lite-pull consumers share no interface for it. */
    interface Start {
        void run() throws MQClientException;
    }

    /**
     * Start a consumer; a refused start (a subscription the broker refuses, say) is
     * reported as {@code start_failed} and the consumer shut down.  Returns whether it started.
     */
    static boolean start(Start start, Runnable shutdown) {
        try {
            start.run();
            return true;
        } catch (MQClientException error) {
            Report.failure("start_failed", error);
            shutdown.run();
            return false;
        }
    }

    /** {@code sql=...} subscribes by SQL92, else {@code expr=...} by tags ("*" by default). */
    static MessageSelector selector(Options options) {
        String sql = options.text("sql", null);
        return sql != null ? MessageSelector.bySql(sql) : MessageSelector.byTag(options.text("expr", "*"));
    }
}
