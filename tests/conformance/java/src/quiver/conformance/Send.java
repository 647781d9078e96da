package quiver.conformance;

import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Synchronous sends: {@code count} messages to {@code topic}, tags cycling through
 * {@code tags}, each with keys and the user properties index, a (= index) and region (eu
 * for even indexes, us for odd).  {@code delay=N} sends at delay level N; {@code orders=N}
 * sends orderly, message i being step i / N of order i % N, its queue chosen by a selector
 * (order % queues).
 */
final class Send {
    private Send() {
    }

    static void run(Options options) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(options.text("group", "JavaConformanceProducer"));
        producer.setNamesrvAddr(options.text("namesrv"));
        producer.start();
        try {
            sendAll(producer, options);
        } catch (Exception error) {
            Report.failure("send_failed", error);
        } finally {
            producer.shutdown();
        }
    }

    private static void sendAll(DefaultMQProducer producer, Options options) throws Exception {
        String topic = options.text("topic");
        String[] tags = options.text("tags", "TagA,TagB").split(",");
        int first = options.number("first", 0);
        int count = options.number("count", 1);
        int delay = options.number("delay", 0);
        int orders = options.number("orders", 0);
        for (int i = first; i < first + count; i++) {
            Message msg = new Message(topic, tags[i % tags.length], "key-" + i,
                ("body-" + i + "-é").getBytes(StandardCharsets.UTF_8));
            msg.putUserProperty("index", Integer.toString(i));
            msg.putUserProperty("a", Integer.toString(i));
            msg.putUserProperty("region", i % 2 == 0 ? "eu" : "us");
            if (delay > 0) {
                msg.setDelayTimeLevel(delay);
            }
            SendResult result;
            if (orders > 0) {
                int order = i % orders;
                msg.putUserProperty("order", Integer.toString(order));
                msg.putUserProperty("step", Integer.toString(i / orders));
                result = producer.send(msg, (queues, message, arg) -> queues.get((Integer) arg % queues.size()),
                    order);
            } else {
                result = producer.send(msg);
            }
            Report.sent("sent", result, "index", i, "at", System.currentTimeMillis());
        }
    }
}
