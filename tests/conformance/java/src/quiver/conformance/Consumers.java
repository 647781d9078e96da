package quiver.conformance;

import org.apache.rocketmq.client.consumer.MessageSelector;

/** What the consuming scenarios share: the subscription they ask for. */
final class Consumers {
    private Consumers() {
    }

    /** {@code sql=...} subscribes by SQL92, else {@code expr=...} by tags ("*" by default). */
    static MessageSelector selector(Options options) {
        String sql = options.text("sql", null);
        return sql != null ? MessageSelector.bySql(sql) : MessageSelector.byTag(options.text("expr", "*"));
    }
}
