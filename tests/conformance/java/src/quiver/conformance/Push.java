package quiver.conformance;

import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The push consumer, clustering, from the first offset of a new group: {@code group},
 * {@code topic}, a tag {@code expr} or a {@code sql} selector, {@code orderly=true} for
 * MessageListenerOrderly.  Each message is reported as it is consumed; with
 * {@code assignment=true} so is each change of the queues rebalancing gave it.  A refused
 * subscription (start() failing) is reported as {@code start_failed}.
 */
final class Push {
    private Push() {
    }

    static void run(Options options) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(options.text("group"));
        consumer.setNamesrvAddr(options.text("namesrv"));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        String topic = options.text("topic");
        consumer.subscribe(topic, Consumers.selector(options));
        Stopper stopper = new Stopper(options);
        if (options.flag("orderly")) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
                for (MessageExt msg : msgs) {
                    Report.message("message", msg, "thread", Thread.currentThread().getName());
                    stopper.received.incrementAndGet();
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                for (MessageExt msg : msgs) {
                    Report.message("message", msg);
                    stopper.received.incrementAndGet();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        if (!Consumers.start(consumer::start, consumer::shutdown)) {
            return;
        }
        Report.event("started", "clientId", consumer.buildMQClientId());
        List<List<Integer>> last = new ArrayList<>();
        boolean assignment = options.flag("assignment");
        stopper.await(() -> {
            if (!assignment) {
                return;
            }
            List<MessageQueue> mine = new ArrayList<>();
            for (MessageQueue mq : consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl()
                .getProcessQueueTable().keySet()) {
                if (mq.getTopic().equals(topic)) {  // not the group's retry topic
                    mine.add(mq);
                }
            }
            List<Integer> now = Report.queueIds(mine);
            if (last.isEmpty() || !last.get(0).equals(now)) {
                last.clear();
                last.add(now);
                Report.event("assigned", "queues", now);
            }
        });
        consumer.shutdown();
        Report.event("done", "received", stopper.received.get());
    }
}
