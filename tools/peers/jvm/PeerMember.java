// Kafka 1.1.1's own ZookeeperConsumerConnector (kafka.javaapi.consumer) as one member of a
// benchmark group, driven over stdin by tools/bench_peers.py (the line protocol of
// tools/bench_member.py). Compiled by tools/bench_peers.py against the legacy-1.1.1
// classpath (tools/jvm/resolve):
//
//   java -cp CLASSES:.jvm/legacy-1.1.1/* PeerMember ZK GROUP TOPIC [streams=N] [key=value]...
//
// Every key=value but streams= is a consumer property (auto.commit.enable=false and
// zookeeper.session.timeout.ms=6000 unless given). Commands, one per line, each answered by
// one line of JSON on stdout:
//   prepare  the classes loaded and the configuration checked; {"id": ""}
//   join     the connector made and its streams created (it registers and rebalances once
//            before createMessageStreams returns); {"at": <epoch seconds before>, "id": ...}
//   stats    {"rebalances", "failed_attempts", "messages"}: counted from the connector's own
//            log ("begin rebalancing consumer ... try #N", "Rebalancing attempt failed")
//   leave    {"at": <epoch seconds>}, then shutdown(): its owner and id znodes deleted
//   halt     {}
//   end of input: the process exits without leaving (the session's end releases all)

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import kafka.consumer.ConsumerConfig;
import kafka.consumer.ConsumerIterator;
import kafka.consumer.KafkaStream;
import kafka.javaapi.consumer.ConsumerConnector;

import org.apache.log4j.AppenderSkeleton;
import org.apache.log4j.Level;
import org.apache.log4j.Logger;
import org.apache.log4j.spi.LoggingEvent;

public class PeerMember {
    static final AtomicLong rebalances = new AtomicLong();
    static final AtomicLong failed = new AtomicLong();
    static final AtomicLong messages = new AtomicLong();

    /** The connector's rebalance log, counted rather than printed. */
    static final class Counting extends AppenderSkeleton {
        @Override
        protected void append(LoggingEvent event) {
            String msg = String.valueOf(event.getMessage());
            if (msg.contains("begin rebalancing consumer")) rebalances.incrementAndGet();
            else if (msg.contains("Rebalancing attempt failed")) failed.incrementAndGet();
        }

        @Override
        public void close() {}

        @Override
        public boolean requiresLayout() {
            return false;
        }
    }

    static void answer(String json) {
        synchronized (System.out) {
            System.out.println(json);
            System.out.flush();
        }
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    static String consumerId(ConsumerConnector connector) throws ReflectiveOperationException {
        Field underlying = connector.getClass().getDeclaredField("underlying");
        underlying.setAccessible(true);
        Object scala = underlying.get(connector);
        Field id = scala.getClass().getDeclaredField("consumerIdString");
        id.setAccessible(true);
        return (String) id.get(scala);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: PeerMember ZK GROUP TOPIC [streams=N] [key=value]...");
            System.exit(2);
        }
        Logger log = Logger.getLogger("kafka.consumer.ZookeeperConsumerConnector");
        log.setLevel(Level.INFO);
        log.setAdditivity(false);  // counted, not printed
        log.addAppender(new Counting());
        Properties props = new Properties();
        props.put("zookeeper.connect", args[0]);
        props.put("group.id", args[1]);
        props.put("auto.commit.enable", "false");
        props.put("zookeeper.session.timeout.ms", "6000");
        String topic = args[2];
        int streams = 1;
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("PeerMember: key=value wanted, got " + args[i]);
                System.exit(2);
            }
            String k = args[i].substring(0, eq), v = args[i].substring(eq + 1);
            if (k.equals("streams")) streams = Integer.parseInt(v);
            else props.put(k, v);
        }
        ConsumerConnector connector = null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String command = line.trim();
            if (command.equals("prepare") && connector == null) {
                new ConsumerConfig(props);  // the classes loaded, the properties checked
                answer("{\"id\": \"\"}");
            } else if (command.equals("join") && connector == null) {
                double at = now();
                connector = kafka.consumer.Consumer.createJavaConsumerConnector(
                    new ConsumerConfig(props));
                Map<String, Integer> counts = new HashMap<>();
                counts.put(topic, streams);
                for (List<KafkaStream<byte[], byte[]>> list :
                         connector.createMessageStreams(counts).values()) {
                    for (KafkaStream<byte[], byte[]> stream : list) drain(stream);
                }
                answer("{\"at\": " + at + ", \"id\": " + quote(consumerId(connector)) + "}");
            } else if (command.equals("stats")) {
                answer("{\"rebalances\": " + rebalances.get() + ", \"failed_attempts\": "
                       + failed.get() + ", \"messages\": " + messages.get() + "}");
            } else if (command.equals("leave") && connector != null) {
                answer("{\"at\": " + now() + "}");
                ConsumerConnector c = connector;
                connector = null;
                c.shutdown();
            } else if (command.equals("halt")) {
                answer("{}");
            } else {
                answer("{\"error\": " + quote("unknown or out-of-turn command " + command) + "}");
            }
        }
        Runtime.getRuntime().halt(0);  // without leaving: the session's end releases all
    }

    static void drain(KafkaStream<byte[], byte[]> stream) {
        Thread t = new Thread(() -> {
            ConsumerIterator<byte[], byte[]> it = stream.iterator();
            try {
                while (it.hasNext()) {
                    it.next();
                    messages.incrementAndGet();
                }
            } catch (RuntimeException e) {
                // the iterator ends with an exception when the connector shuts down under it
            }
        }, "stream");
        t.setDaemon(true);
        t.start();
    }
}
