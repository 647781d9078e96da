package quiver.conformance;

import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/** What a scenario saw, one JSON object per stdout line, for the Python test to read. */
final class Report {
    private Report() {
    }

    /** Print one event: {@code event} then the given key, value pairs. */
    static synchronized void event(String event, Object... pairs) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("event", event);
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            line.put((String) pairs[i], pairs[i + 1]);
        }
        System.out.println(JSON.toJSONString(line));
        System.out.flush();
    }

    static void message(String event, MessageExt msg, Object... more) {
        Object[] pairs = new Object[22 + more.length];
        int i = 0;
        for (Object value : new Object[] {
            "msgId", msg.getMsgId(), "topic", msg.getTopic(), "tags", msg.getTags(), "keys", msg.getKeys(),
            "body", new String(msg.getBody(), StandardCharsets.UTF_8), "queueId", msg.getQueueId(),
            "queueOffset", msg.getQueueOffset(), "reconsumeTimes", msg.getReconsumeTimes(),
            "bornTimestamp", msg.getBornTimestamp(), "storeTimestamp", msg.getStoreTimestamp(),
            "properties", new TreeMap<>(msg.getProperties())}) {
            pairs[i++] = value;
        }
        System.arraycopy(more, 0, pairs, i, more.length);
        event(event, pairs);
    }

    static void sent(String event, SendResult result, Object... more) {
        Object[] pairs = new Object[10 + more.length];
        Object[] fixed = {
            "status", result.getSendStatus().name(), "msgId", result.getMsgId(),
            "offsetMsgId", result.getOffsetMsgId(), "queueId", result.getMessageQueue().getQueueId(),
            "queueOffset", result.getQueueOffset()};
        System.arraycopy(fixed, 0, pairs, 0, fixed.length);
        System.arraycopy(more, 0, pairs, fixed.length, more.length);
        event(event, pairs);
    }

    /** An exception as the client raised it: its class, message and RocketMQ response code. */
    static void failure(String event, Throwable error) {
        int code = -1;
        if (error instanceof MQClientException) {
            code = ((MQClientException) error).getResponseCode();
        } else if (error instanceof MQBrokerException) {
            code = ((MQBrokerException) error).getResponseCode();
        }
        event(event, "error", error.getClass().getSimpleName(), "message", String.valueOf(error.getMessage()),
            "code", code);
    }

    static List<Integer> queueIds(Iterable<MessageQueue> queues) {
        List<Integer> ids = new ArrayList<>();
        for (MessageQueue mq : queues) {
            ids.add(mq.getQueueId());
        }
        ids.sort(null);
        return ids;
    }
}
