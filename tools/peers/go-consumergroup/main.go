// Go's github.com/wvanbergen/kafka/consumergroup (kazoo-go, Sarama) as one member of a
// benchmark group, driven over stdin by tools/bench_peers.py (the line protocol of
// tools/bench_member.py):
//
//	member ZK GROUP TOPIC [count=N]
//
// Commands, one per line, each answered by one line of JSON on stdout:
//
//	prepare  nothing to make ahead (JoinConsumerGroup makes its clients and registers at once)
//	join     JoinConsumerGroup: {"at": <epoch seconds before it>, "id": <instance id>}
//	stats    {"rebalances", "claim_errors", "errors"}: counted from the library's own log
//	         (sarama.Logger); it keeps no counter, and its retries of a partition still
//	         claimed by another member (ErrPartitionClaimedByOther) are silent
//	leave    {"at": <epoch seconds>}, then Close(): its owner and id znodes deleted
//	halt     {}
//	end of input: the process exits without leaving (the session's end releases all)
//
// count=N (tools/bench throughput): joins at once, reads from the oldest offset and, at the
// N-th message, prints "COUNT <n> <first ns> <last ns>" (monotonic nanoseconds) and exits.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/Shopify/sarama"
	"github.com/wvanbergen/kafka/consumergroup"
)

type counters struct {
	sync.Mutex
	Rebalances  int      `json:"rebalances"`
	ClaimErrors int      `json:"claim_errors"`
	Errors      []string `json:"errors"`
	Messages    int64    `json:"messages"`
	ID          string   `json:"-"`
}

var stats counters

// logCounter is the library's logger: its lines counted, not printed.
type logCounter struct{}

func (logCounter) count(line string) {
	stats.Lock()
	defer stats.Unlock()
	switch {
	case strings.Contains(line, "Currently registered consumers"):
		stats.Rebalances++ // each consumer-list change starts one (the first too)
	case strings.Contains(line, "Consumer instance registered ("):
		// The instance id, which the library keeps unexported: "... registered (<id>)."
		i := strings.LastIndex(line, "registered (")
		stats.ID = strings.TrimSuffix(strings.TrimSpace(line[i+len("registered ("):]), ").")
	case strings.Contains(line, "FAILED to claim"):
		stats.ClaimErrors++
	case strings.Contains(line, "FAILED"):
		stats.Errors = append(stats.Errors, line)
	}
}
func (l logCounter) Print(v ...interface{})                 { l.count(fmt.Sprint(v...)) }
func (l logCounter) Printf(format string, v ...interface{}) { l.count(fmt.Sprintf(format, v...)) }
func (l logCounter) Println(v ...interface{})               { l.count(fmt.Sprintln(v...)) }

type quiet struct{}

func (quiet) Printf(string, ...interface{}) {}

func answer(v interface{}) {
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}

func join(zk, group, topic string) (*consumergroup.ConsumerGroup, error) {
	config := consumergroup.NewConfig()
	config.Offsets.Initial = sarama.OffsetOldest
	config.Zookeeper.Timeout = 6 * time.Second // as zkconsumer's members (the default is 1 s)
	config.Zookeeper.Logger = quiet{}          // go-zookeeper's connection chatter
	cg, err := consumergroup.JoinConsumerGroup(group, []string{topic}, strings.Split(zk, ","), config)
	if err != nil {
		return nil, err
	}
	go func() {
		for e := range cg.Errors() {
			stats.Lock()
			stats.Errors = append(stats.Errors, e.Error())
			stats.Unlock()
		}
	}()
	return cg, nil
}

func count(zk, group, topic string, target int64) {
	var first int64 = -1
	start := time.Now()
	cg, err := join(zk, group, topic)
	if err != nil {
		fmt.Fprintln(os.Stderr, "member:", err)
		os.Exit(1)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	var n int64
	for {
		select {
		case m := <-cg.Messages():
			_ = m.Value
			if first < 0 {
				first = int64(time.Since(start))
			}
			n++
			if n == target {
				fmt.Printf("COUNT %d %d %d\n", n, first, int64(time.Since(start)))
				os.Exit(0)
			}
		case <-term:
			fmt.Printf("COUNT %d %d -1\n", n, first)
			os.Exit(0)
		}
	}
}

func instanceID() string {
	stats.Lock()
	defer stats.Unlock()
	return stats.ID
}

func serve(zk, group, topic string) {
	var cg *consumergroup.ConsumerGroup
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch command := strings.TrimSpace(in.Text()); {
		case command == "prepare" && cg == nil:
			answer(map[string]string{"id": ""})
		case command == "join" && cg == nil:
			at := float64(time.Now().UnixNano()) / 1e9
			c, err := join(zk, group, topic)
			if err != nil {
				answer(map[string]string{"error": "JoinConsumerGroup: " + err.Error()})
				continue
			}
			cg = c
			go func() { // drained: a full channel would hold up its partition consumers
				for m := range c.Messages() {
					stats.Lock()
					stats.Messages++
					stats.Unlock()
					_ = m
				}
			}()
			answer(map[string]interface{}{"at": at, "id": instanceID()})
		case command == "stats":
			stats.Lock()
			errs := stats.Errors
			if len(errs) > 5 {
				errs = errs[len(errs)-5:]
			}
			answer(map[string]interface{}{"rebalances": stats.Rebalances,
				"claim_errors": stats.ClaimErrors, "errors": errs,
				"error_count": len(stats.Errors), "messages": stats.Messages})
			stats.Unlock()
		case command == "leave" && cg != nil:
			answer(map[string]float64{"at": float64(time.Now().UnixNano()) / 1e9})
			c := cg
			cg = nil
			go c.Close()
		case command == "halt":
			answer(map[string]string{})
		default:
			answer(map[string]string{"error": fmt.Sprintf("unknown or out-of-turn command %q", command)})
		}
	}
	os.Exit(0)
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: member ZK GROUP TOPIC [count=N]")
		os.Exit(2)
	}
	sarama.Logger = logCounter{}
	zk, group, topic := os.Args[1], os.Args[2], os.Args[3]
	for _, kv := range os.Args[4:] {
		if strings.HasPrefix(kv, "count=") {
			n, err := strconv.ParseInt(kv[len("count="):], 10, 64)
			if err != nil || n <= 0 {
				fmt.Fprintln(os.Stderr, "member: count= wants a positive number, got", kv)
				os.Exit(2)
			}
			count(zk, group, topic, n)
		}
	}
	serve(zk, group, topic)
}
