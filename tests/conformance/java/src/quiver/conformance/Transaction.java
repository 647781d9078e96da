package quiver.conformance;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A transactional producer: {@code count} half messages to {@code topic}; the local
 * transaction answers {@code local} (COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW).  A
 * check-back answers UNKNOW until the {@code answerAt}-th check of a message, which answers
 * {@code check}.  {@code immunity=S} sets CHECK_IMMUNITY_TIME_IN_SECONDS.  Each check is
 * reported with the TRANSACTION_CHECK_TIMES the broker wrote and the ms since the send.
 * Runs until the stopper says (expect = the number of checks to wait for).
 */
final class Transaction {
    private Transaction() {
    }

    static void run(Options options) throws Exception {
        TransactionMQProducer producer = new TransactionMQProducer(options.text("group"));
        producer.setNamesrvAddr(options.text("namesrv"));
        LocalTransactionState local = LocalTransactionState.valueOf(options.text("local", "UNKNOW"));
        LocalTransactionState answer = LocalTransactionState.valueOf(options.text("check", "COMMIT_MESSAGE"));
        int answerAt = options.number("answerAt", 1);
        Map<String, Long> sentAt = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        Stopper stopper = new Stopper(options);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return local;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                // A check carries the half message as stored (msgId: its offset id); the id the
                // send returned is its transactionId (the UNIQ_KEY).
                String id = msg.getTransactionId();
                int nth = checks.computeIfAbsent(id, key -> new AtomicInteger()).incrementAndGet();
                LocalTransactionState state = nth >= answerAt ? answer : LocalTransactionState.UNKNOW;
                Long at = sentAt.get(id);
                Report.message("check", msg, "transactionId", id, "nth", nth, "answer", state.name(),
                    "checkTimes", msg.getProperty(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES),
                    "sinceSend", at == null ? -1 : System.currentTimeMillis() - at);
                stopper.received.incrementAndGet();
                return state;
            }
        });
        producer.start();
        try {
            String topic = options.text("topic");
            int immunity = options.number("immunity", 0);
            for (int i = 0; i < options.number("count", 1); i++) {
                Message msg = new Message(topic, "TagT", "txn-" + i, ("txn-" + i).getBytes(StandardCharsets.UTF_8));
                msg.putUserProperty("index", Integer.toString(i));
                if (immunity > 0) {
                    msg.putUserProperty(MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
                        Integer.toString(immunity));
                }
                long at = System.currentTimeMillis();
                TransactionSendResult result = producer.sendMessageInTransaction(msg, null);
                sentAt.put(result.getMsgId(), at);
                Report.sent("sent", result, "index", i, "transactionId", result.getTransactionId(),
                    "localState", result.getLocalTransactionState().name(), "at", at);
            }
            stopper.await(null);
        } finally {
            producer.shutdown();
        }
        Report.event("done", "checks", stopper.received.get());
    }
}
