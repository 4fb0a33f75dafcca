// k8sdds-mqtt: MQTT throughput and latency for k8sdds, through a broker (mosquitto).
//
// It prints one line per second in ddsperf's format, so k8sdds reads both alike:
//
//	pub:  [pid] T RATE/s pub |
//	sub:  [pid] T size S total N lost L delta n lost l rate X kS/s Y Mb/s
//	ping: [pid] T size S mean Aus min Bus 50% Cus 90% Dus 99% Eus max Fus cnt N
//
// and `error: ...` lines for what went wrong. Every message carries a sequence number (its
// first 8 bytes, big-endian), from which a subscriber counts what it lost; a ping carries
// its send time. The publisher (or ping) first waits until every subscriber (or pong) says
// on TOPIC/ready that it has subscribed, so no test starts before its peers listen.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

var (
	mode     = flag.String("mode", "", "pub, sub, ping or pong")
	broker   = flag.String("broker", "127.0.0.1:1883", "the broker's host:port")
	topic    = flag.String("topic", "k8sdds", "the topic")
	size     = flag.Int("size", 64, "payload bytes (at least 16)")
	qos      = flag.Int("qos", 0, "MQTT QoS: 0, 1 or 2")
	duration = flag.Float64("duration", 10, "seconds of measurement (pub, ping)")
	rate     = flag.Int("rate", 0, "messages/s (pub; 0: as fast as possible)")
	peers    = flag.Int("peers", 1, "subscribers (pongs) to wait for (pub, ping)")
	wait     = flag.Float64("wait", 10, "seconds to wait for the broker and the peers")
	window   = flag.Int("window", 64, "messages in flight (pub)")
	id       = flag.String("id", "", "client id [mode and pid]")
	version  = flag.Bool("version", false, "print the version and the MQTT client's, and exit")
)

var start = time.Now()

func line(format string, args ...any) {
	fmt.Printf("[%d] %.3f "+format+"\n", append([]any{os.Getpid(), time.Since(start).Seconds()}, args...)...)
}

func fail(format string, args ...any) {
	fmt.Printf("error: "+format+"\n", args...)
	os.Exit(1)
}

func connect(name string) mqtt.Client {
	if *id == "" {
		*id = fmt.Sprintf("k8sdds-%s-%d", name, os.Getpid())
	}
	opts := mqtt.NewClientOptions().AddBroker("tcp://" + *broker).SetClientID(*id).
		SetCleanSession(true).SetAutoReconnect(false).SetOrderMatters(true).
		SetConnectTimeout(2 * time.Second).SetKeepAlive(30 * time.Second).
		SetMessageChannelDepth(100000)
	client := mqtt.NewClient(opts)
	deadline := time.Now().Add(time.Duration(*wait * float64(time.Second)))
	for {
		tok := client.Connect()
		tok.Wait()
		if tok.Error() == nil {
			return client
		}
		if time.Now().After(deadline) {
			fail("cannot connect to the broker %s: %v", *broker, tok.Error())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func check(tok mqtt.Token, what string) {
	if tok.Wait(); tok.Error() != nil {
		fail("%s: %v", what, tok.Error())
	}
}

// awaitPeers returns once `peers` clients have announced themselves on topic/ready.
func awaitPeers(client mqtt.Client) {
	seen := make(chan string, 1024)
	check(client.Subscribe(*topic+"/ready", 1, func(_ mqtt.Client, m mqtt.Message) {
		seen <- string(m.Payload())
	}), "subscribe "+*topic+"/ready")
	ready := map[string]bool{}
	timeout := time.After(time.Duration(*wait * float64(time.Second)))
	for len(ready) < *peers {
		select {
		case who := <-seen:
			ready[who] = true
		case <-timeout:
			fail("%d of %d peers subscribed within %g s", len(ready), *peers, *wait)
		}
	}
}

// announce says on topic/ready, again every 200 ms until stopped, that this client listens.
func announce(client mqtt.Client, stop <-chan struct{}) {
	for {
		client.Publish(*topic+"/ready", 1, false, *id)
		select {
		case <-stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func payload(seq uint64) []byte {
	buf := make([]byte, *size)
	binary.BigEndian.PutUint64(buf, seq)
	binary.BigEndian.PutUint64(buf[8:], uint64(time.Now().UnixNano()))
	return buf
}

func pub() {
	client := connect("pub")
	awaitPeers(client)
	var sent atomic.Uint64
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last := uint64(0)
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				now := sent.Load()
				line("%d/s pub |", now-last)
				last = now
			}
		}
	}()
	end := time.Now().Add(time.Duration(*duration * float64(time.Second)))
	var interval time.Duration
	if *rate > 0 {
		interval = time.Second / time.Duration(*rate)
	}
	inflight := make([]mqtt.Token, 0, *window)
	next := time.Now()
	for seq := uint64(0); time.Now().Before(end); seq++ {
		// every QoS keeps a window of messages in flight: a QoS 0 token completes when the
		// message is written, and waiting on each serialised the publisher with the
		// client's writer (0.76 of mosquitto_pub's rate at 16 KiB before: docs/how-to/mqtt.md)
		inflight = append(inflight, client.Publish(*topic, byte(*qos), false, payload(seq)))
		if len(inflight) >= *window {
			check(inflight[0], "publish")
			inflight = inflight[1:]
		}
		sent.Add(1)
		if interval > 0 {
			next = next.Add(interval)
			time.Sleep(time.Until(next))
		}
	}
	for _, tok := range inflight {
		check(tok, "publish")
	}
	close(done)
	client.Disconnect(250)
}

func sub() {
	client := connect("sub")
	var mu sync.Mutex
	var total, lost, delta, deltaLost, bytes uint64
	expect := uint64(0)
	check(client.Subscribe(*topic, byte(*qos), func(_ mqtt.Client, m mqtt.Message) {
		p := m.Payload()
		if len(p) < 8 {
			return
		}
		seq := binary.BigEndian.Uint64(p)
		mu.Lock() // messages come in order (OrderMatters): a gap is a loss, a repeat a duplicate
		if seq > expect {
			lost += seq - expect
			deltaLost += seq - expect
		}
		if seq >= expect {
			expect = seq + 1
		}
		total++
		delta++
		bytes += uint64(len(p))
		mu.Unlock()
	}), "subscribe "+*topic)
	stop := make(chan struct{})
	go announce(client, stop)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(time.Second)
	started := false
	for {
		select {
		case <-signals:
			client.Disconnect(100)
			return
		case <-tick.C:
			mu.Lock()
			if total > 0 && !started {
				started = true
				close(stop) // the publisher is sending: it heard us
			}
			if started {
				line("size %d total %d lost %d delta %d lost %d rate %.2f kS/s %.2f Mb/s",
					*size, total, lost, delta, deltaLost, float64(delta)/1e3,
					float64(bytes)*8/1e6)
			}
			delta, deltaLost, bytes = 0, 0, 0
			mu.Unlock()
		}
	}
}

func percentile(sorted []float64, p float64) float64 {
	i := int(p / 100 * float64(len(sorted)-1))
	return sorted[i]
}

func ping() {
	client := connect("ping")
	replies := make(chan uint64, 16)
	check(client.Subscribe(*topic+"/pong", byte(*qos), func(_ mqtt.Client, m mqtt.Message) {
		if p := m.Payload(); len(p) >= 8 {
			replies <- binary.BigEndian.Uint64(p)
		}
	}), "subscribe "+*topic+"/pong")
	awaitPeers(client)
	end := time.Now().Add(time.Duration(*duration * float64(time.Second)))
	nextLine := time.Now().Add(time.Second)
	var rtts []float64
	report := func() {
		if len(rtts) == 0 {
			return
		}
		sort.Float64s(rtts)
		sum := 0.0
		for _, r := range rtts {
			sum += r
		}
		line("size %d mean %.3fus min %.3fus 50%% %.3fus 90%% %.3fus 99%% %.3fus max %.3fus cnt %d",
			*size, sum/float64(len(rtts)), rtts[0], percentile(rtts, 50), percentile(rtts, 90),
			percentile(rtts, 99), rtts[len(rtts)-1], len(rtts))
		rtts = rtts[:0]
	}
	for seq := uint64(0); time.Now().Before(end); seq++ {
		sentAt := time.Now()
		check(client.Publish(*topic+"/ping", byte(*qos), false, payload(seq)), "publish")
		timeout := time.After(time.Second)
	wait:
		for {
			select {
			case got := <-replies:
				if got == seq {
					// one pong per ping: with more pongs, the first reply counts
					rtts = append(rtts, float64(time.Since(sentAt).Nanoseconds())/1e3)
					break wait
				}
			case <-timeout:
				break wait
			}
		}
		if time.Now().After(nextLine) {
			report()
			nextLine = nextLine.Add(time.Second)
		}
	}
	report()
	client.Disconnect(250)
}

func pong() {
	client := connect("pong")
	check(client.Subscribe(*topic+"/ping", byte(*qos), func(c mqtt.Client, m mqtt.Message) {
		c.Publish(*topic+"/pong", byte(*qos), false, m.Payload())
	}), "subscribe "+*topic+"/ping")
	stop := make(chan struct{})
	go announce(client, stop)
	time.AfterFunc(time.Duration(*wait*float64(time.Second)), func() { close(stop) })
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	client.Disconnect(100)
}

func main() {
	flag.Parse()
	if *version {
		client := "paho.mqtt.golang"
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, dep := range info.Deps {
				if dep.Path == "github.com/eclipse/paho.mqtt.golang" {
					client += " " + dep.Version
				}
			}
		}
		fmt.Printf("k8sdds-mqtt 1 (%s)\n", client)
		return
	}
	if *size < 16 {
		fail("size %d: at least 16 bytes (sequence number and send time)", *size)
	}
	if *qos < 0 || *qos > 2 {
		fail("qos %d: 0, 1 or 2", *qos)
	}
	switch *mode {
	case "pub":
		pub()
	case "sub":
		sub()
	case "ping":
		ping()
	case "pong":
		pong()
	default:
		fail("mode %q: pub, sub, ping or pong", *mode)
	}
}
