package quiver.conformance;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * DefaultMQPullConsumer as applications use it: every queue of {@code topic} read from the
 * group's committed offset (0 for a new group) until NO_NEW_MSG, 32 at a time, by tag
 * {@code expr} or {@code sql}; the offsets reached are committed to the broker at the end.
 * Reports each message, then one {@code queue} event per queue (start, next offset, the
 * statuses seen).
 */
final class Pull {
    private Pull() {
    }

    static void run(Options options) throws Exception {
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(options.text("group"));
        consumer.setNamesrvAddr(options.text("namesrv"));
        consumer.setRegisterTopics(Collections.singleton(options.text("topic")));
        consumer.start();
        try {
            MessageSelector selector = Consumers.selector(options);
            List<MessageQueue> queues = new ArrayList<>(consumer.fetchSubscribeMessageQueues(options.text("topic")));
            queues.sort(null);
            Set<MessageQueue> read = new HashSet<>();
            for (MessageQueue mq : queues) {
                long start = Math.max(0, consumer.fetchConsumeOffset(mq, true));
                long offset = start;
                List<String> statuses = new ArrayList<>();
                while (true) {
                    PullResult result = pullOnce(consumer, mq, selector, offset);
                    statuses.add(result.getPullStatus().name());
                    if (result.getPullStatus() == PullStatus.FOUND) {
                        for (MessageExt msg : result.getMsgFoundList()) {
                            Report.message("message", msg);
                        }
                    }
                    if (result.getPullStatus() == PullStatus.NO_NEW_MSG
                        || result.getPullStatus() == PullStatus.OFFSET_ILLEGAL
                        || result.getNextBeginOffset() == offset) {
                        break;
                    }
                    offset = result.getNextBeginOffset();
                }
                consumer.updateConsumeOffset(mq, offset);
                read.add(mq);
                Report.event("queue", "queueId", mq.getQueueId(), "start", start, "next", offset,
                    "statuses", statuses);
            }
            consumer.getOffsetStore().persistAll(read);
        } catch (Exception error) {
            Report.failure("pull_failed", error);
        } finally {
            consumer.shutdown();
        }
        Report.event("done");
    }

    /**
     * One pull.  The client refuses a SQL92 pull to a broker whose version it has not yet
     * learnt ("does not upgrade to support for filter message by SQL92"): it learns it from
     * its first heartbeat, a second after start (as with RocketMQ's broker), so such a
     * refusal is retried for up to 5 s.
     */
    private static PullResult pullOnce(DefaultMQPullConsumer consumer, MessageQueue mq, MessageSelector selector,
        long offset) throws Exception {
        for (int attempt = 0; ; attempt++) {
            try {
                return consumer.pull(mq, selector, offset, 32);
            } catch (MQClientException error) {
                String message = String.valueOf(error.getMessage());
                if (attempt >= 50 || !message.contains("does not upgrade to support for filter message")) {
                    throw error;
                }
                Thread.sleep(100);
            }
        }
    }
}
