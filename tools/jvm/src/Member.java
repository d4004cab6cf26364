// A member of a legacy consumer group on the JVM: Kafka's own ZookeeperConsumerConnector
// (kafka.javaapi.consumer), for the interoperability tests and for people comparing
// zkconsumer with the original. One source file, launched without a build step against the
// classpath of a legacy Kafka release (Kafka 1.1.1 or 0.11.0.3, see tools/jvm/legacy-*):
//
//   java -cp '.jvm/legacy-1.1.1/*' tools/jvm/src/Member.java member \
//        --zookeeper HOST:PORT --group G (--topics T1,T2 | --whitelist REGEX) \
//        [--streams N] [--strategy range|roundrobin] [--commit auto|each|none] \
//        [--prop key=value]... [--output messages|count] [--target N]
//   java -cp '.jvm/legacy-1.1.1/*' tools/jvm/src/Member.java assign \
//        --zookeeper HOST:PORT --strategy range|roundrobin [--group G] --scenario /CHROOT...
//
// member: prints "READY <consumer id>" once its streams exist, then one line
// "MSG <topic> <partition> <offset> <stream index> <epoch millis>" for each message handed
// out, and
// "CLOSED <consumer id>" after a clean shutdown (SIGTERM runs the shutdown hook, which shuts
// the connector down, committing offsets when auto.commit.enable is on). --commit each
// turns auto-commit off and commits each message's partition after printing it (a kill in
// between leaves that one message to be handed out again), none turns auto-commit off,
// auto (default) leaves the legacy properties in charge.
// --output count (for tools/bench throughput) prints nothing per message: the streams count
// what they hand out (reading each message's payload, as an application would) and, when
// --target N messages have been handed out, the member prints
// "COUNT <count> <first nanos> <last nanos>" (System.nanoTime of the first message handed
// out and of the Nth) and exits (the shutdown hook closes the connector, CLOSED follows). A
// SIGTERM before the target prints "COUNT <count> <first nanos> -1" (first -1 before any
// message). --output messages (the default) is the MSG output above.
//
// assign: for each scenario (a ZooKeeper chroot holding a group and its topics, so that
// scenarios stay apart), runs the JVM's own PartitionAssignor (range or roundrobin) for
// group G (default g1) once per member registered under /consumers/G/ids, exactly as a
// rebalancing member does (AssignmentContext reads the members and /brokers/topics through
// ZkUtils), and prints "ASSIGN <chroot> <topic> <partition> <thread id>" for every partition
// assigned, then "DONE <chroot>". Many scenarios share one JVM start.

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import kafka.common.OffsetAndMetadata;
import kafka.common.TopicAndPartition;
import kafka.consumer.AssignmentContext;
import kafka.consumer.ConsumerConfig;
import kafka.consumer.ConsumerIterator;
import kafka.consumer.ConsumerThreadId;
import kafka.consumer.KafkaStream;
import kafka.consumer.PartitionAssignor;
import kafka.consumer.RangeAssignor;
import kafka.consumer.RoundRobinAssignor;
import kafka.consumer.Whitelist;
import kafka.javaapi.consumer.ConsumerConnector;
import kafka.message.MessageAndMetadata;
import kafka.utils.ZkUtils;

public class Member {
    private static final Object OUT = new Object();

    static void emit(String line) {
        synchronized (OUT) {  // one whole line at a time from any stream thread
            System.out.println(line);
            System.out.flush();
        }
    }

    static void fail(String message) {
        System.err.println("Member: " + message);
        System.exit(2);
    }

    /** --name value pairs; --prop and --group may repeat. */
    static Map<String, List<String>> parse(String[] args, int from) {
        Map<String, List<String>> opts = new HashMap<>();
        for (int i = from; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                fail("expected --option value, got " + args[i]);
            }
            opts.computeIfAbsent(args[i].substring(2), k -> new ArrayList<>()).add(args[i + 1]);
        }
        return opts;
    }

    static String one(Map<String, List<String>> opts, String name, String dflt) {
        List<String> values = opts.get(name);
        if (values == null) {
            if (dflt == null) fail("--" + name + " is required");
            return dflt;
        }
        return values.get(values.size() - 1);
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) fail("usage: Member.java member|assign --option value ...");
        Map<String, List<String>> opts = parse(args, 1);
        switch (args[0]) {
            case "member": member(opts); break;
            case "assign": assign(opts); break;
            default: fail("unknown mode " + args[0] + " (member or assign)");
        }
    }

    // ---------------------------------------------------------------------------------
    // member
    // ---------------------------------------------------------------------------------

    /** The consumer id the connector registered: a private field of the Scala connector
     *  inside the Java one (reachable: both are on the class path, not in named modules). */
    static String consumerId(ConsumerConnector connector) throws ReflectiveOperationException {
        Field underlying = connector.getClass().getDeclaredField("underlying");
        underlying.setAccessible(true);
        Object scala = underlying.get(connector);
        Field id = scala.getClass().getDeclaredField("consumerIdString");
        id.setAccessible(true);
        return (String) id.get(scala);
    }

    static void member(Map<String, List<String>> opts) throws Exception {
        Properties props = new Properties();
        props.put("zookeeper.connect", one(opts, "zookeeper", null));
        props.put("group.id", one(opts, "group", null));
        props.put("partition.assignment.strategy", one(opts, "strategy", "range"));
        String commit = one(opts, "commit", "auto");
        boolean each = commit.equals("each");
        if (commit.equals("each") || commit.equals("none")) {
            props.put("auto.commit.enable", "false");
        } else if (!commit.equals("auto")) {
            fail("--commit must be auto, each or none, got " + commit);
        }
        for (String kv : opts.getOrDefault("prop", List.of())) {
            int eq = kv.indexOf('=');
            if (eq <= 0) fail("--prop wants key=value, got " + kv);
            props.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        int streams = Integer.parseInt(one(opts, "streams", "1"));
        String output = one(opts, "output", "messages");
        if (!output.equals("messages") && !output.equals("count")) {
            fail("--output must be messages or count, got " + output);
        }
        boolean counting = output.equals("count");
        long target = Long.parseLong(one(opts, "target", "0"));
        if (counting && each) fail("--output count is for reading alone: not with --commit each");
        ConsumerConnector connector =
            kafka.consumer.Consumer.createJavaConsumerConnector(new ConsumerConfig(props));
        String id = consumerId(connector);
        List<KafkaStream<byte[], byte[]>> all = new ArrayList<>();
        if (opts.containsKey("whitelist")) {
            all.addAll(connector.createMessageStreamsByFilter(
                new Whitelist(one(opts, "whitelist", null)), streams));
        } else {
            Map<String, Integer> counts = new HashMap<>();
            for (String topic : one(opts, "topics", null).split(",")) counts.put(topic, streams);
            for (List<KafkaStream<byte[], byte[]>> list :
                     connector.createMessageStreams(counts).values()) {
                all.addAll(list);
            }
        }
        CountDownLatch closed = new CountDownLatch(1);
        Counter counter = counting ? new Counter(target) : null;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (counter != null) counter.report(counter.count.get());  // unless at the target
            connector.shutdown();
            emit("CLOSED " + id);
            closed.countDown();
        }, "member-shutdown"));
        emit("READY " + id);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < all.size(); i++) {
            KafkaStream<byte[], byte[]> stream = all.get(i);
            int index = i;
            Thread t = new Thread(counter != null ? () -> count(stream, counter)
                                                  : () -> drain(connector, stream, index, each),
                                  "stream-" + i);
            t.setDaemon(true);
            t.start();
            threads.add(t);
        }
        closed.await();  // the shutdown hook ends the process's work
    }

    /** What the streams of a counting member have handed out, and when (System.nanoTime). */
    static final class Counter {
        final long target;
        final AtomicLong count = new AtomicLong();
        final AtomicLong first = new AtomicLong(-1);
        volatile long last = -1;  // when the target was reached
        final AtomicBoolean reported = new AtomicBoolean();
        long sink;  // payload bytes read (kept, so that reading them is not optimised away)

        Counter(long target) {
            this.target = target;
        }

        /** One message handed out; at the target, report and exit. */
        void handed() {
            if (first.get() < 0) first.compareAndSet(-1, System.nanoTime());
            long n = count.incrementAndGet();
            if (n == target) {
                last = System.nanoTime();
                report(n);
                System.exit(0);  // the shutdown hook closes the connector
            }
        }

        /** The COUNT line, once: the target's, or (from the shutdown hook) the count so far. */
        void report(long n) {
            if (reported.compareAndSet(false, true)) {
                emit("COUNT " + n + " " + first.get() + " " + last);
            }
        }
    }

    static void count(KafkaStream<byte[], byte[]> stream, Counter counter) {
        ConsumerIterator<byte[], byte[]> it = stream.iterator();
        long bytes = 0;
        try {
            while (it.hasNext()) {
                byte[] payload = it.next().message();
                bytes += payload == null ? 0 : payload.length;
                counter.handed();
            }
        } catch (RuntimeException e) {
            // the iterator ends with an exception when the connector shuts down under it
        } finally {
            synchronized (counter) {
                counter.sink += bytes;
            }
        }
    }

    static void drain(ConsumerConnector connector, KafkaStream<byte[], byte[]> stream,
                      int index, boolean each) {
        ConsumerIterator<byte[], byte[]> it = stream.iterator();
        try {
            while (it.hasNext()) {
                MessageAndMetadata<byte[], byte[]> m = it.next();
                emit("MSG " + m.topic() + " " + m.partition() + " " + m.offset() + " " + index
                     + " " + System.currentTimeMillis());
                if (each) {
                    // This message's partition only, the offset after it: what was handed out
                    // is committed (a kill in between leaves this one message uncommitted).
                    Map<TopicAndPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    offsets.put(new TopicAndPartition(m.topic(), m.partition()),
                                OffsetAndMetadata.apply(m.offset() + 1));
                    connector.commitOffsets(offsets, true);
                }
            }
        } catch (RuntimeException e) {
            // the iterator ends with an exception when the connector shuts down under it
        }
    }

    // ---------------------------------------------------------------------------------
    // assign
    // ---------------------------------------------------------------------------------

    static void assign(Map<String, List<String>> opts) {
        String zookeeper = one(opts, "zookeeper", null);
        String strategy = one(opts, "strategy", null);
        // The classes PartitionAssignor.createInstance picks (Scala 2.11 has no static
        // forwarder on the trait for Java to call it by).
        PartitionAssignor assignor = null;
        switch (strategy) {
            case "range": assignor = new RangeAssignor(); break;
            case "roundrobin": assignor = new RoundRobinAssignor(); break;
            default: fail("--strategy must be range or roundrobin, got " + strategy);
        }
        String group = one(opts, "group", "g1");
        for (String chroot : opts.getOrDefault("scenario", List.of())) {
            ZkUtils zk = ZkUtils.apply(zookeeper + chroot, 30000, 30000, false);
            try {
                assignGroup(zk, assignor, group, chroot.isEmpty() ? "/" : chroot);
            } finally {
                zk.close();
            }
        }
    }

    static void assignGroup(ZkUtils zk, PartitionAssignor assignor, String group,
                            String scenario) {
        List<String> members = scala.collection.JavaConverters
            .seqAsJavaListConverter(zk.getConsumersInGroup(group)).asJava();
        Map<TopicAndPartition, String> global = new HashMap<>();
        for (String consumer : members) {
            AssignmentContext ctx = new AssignmentContext(group, consumer, true, zk);
            // Pool.get: null for a member that owns nothing
            scala.collection.mutable.Map<TopicAndPartition, ConsumerThreadId> mine =
                assignor.assign(ctx).get(consumer);
            if (mine == null) continue;
            Map<TopicAndPartition, ConsumerThreadId> owned =
                scala.collection.JavaConverters.mapAsJavaMapConverter(mine).asJava();
            for (Map.Entry<TopicAndPartition, ConsumerThreadId> e : owned.entrySet()) {
                String previous = global.put(e.getKey(), e.getValue().toString());
                if (previous != null) {
                    fail(scenario + ": " + e.getKey() + " assigned to " + previous + " and " + e.getValue());
                }
            }
        }
        for (Map.Entry<TopicAndPartition, String> e : global.entrySet()) {
            emit("ASSIGN " + scenario + " " + e.getKey().topic() + " " + e.getKey().partition()
                 + " " + e.getValue());
        }
        emit("DONE " + scenario);
    }
}
