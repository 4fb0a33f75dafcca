//! As Zenoh's z_ping: put one payload on test/ping, wait for its echo on test/pong (a
//! subscriber's FIFO), `-w` seconds of warm-up, then `-n` round trips, each printed.
use std::time::{Duration, Instant};

use zenoh::qos::CongestionControl;
use zenoh::Wait;

fn main() {
    let o = zenoh_reference::options();
    let size = o.size();
    let session = o.open();
    let sub = session.declare_subscriber("test/pong").wait().expect("subscribe test/pong");
    let publisher = session
        .declare_publisher("test/ping")
        .congestion_control(CongestionControl::Block)
        .express(o.express)
        .wait()
        .expect("declare the publisher");
    let data = zenoh_reference::payload(size);
    let warmup = Duration::from_secs_f64(o.warmup);
    let now = Instant::now();
    while now.elapsed() < warmup {
        publisher.put(data.clone()).wait().expect("put");
        let _ = sub.recv();
    }
    let mut samples = Vec::with_capacity(o.number);
    for _ in 0..o.number {
        let data = data.clone();
        let sent = Instant::now();
        publisher.put(data).wait().expect("put");
        let _ = sub.recv();
        samples.push(sent.elapsed().as_micros());
    }
    for (i, rtt) in samples.iter().enumerate() {
        println!("{size} bytes: seq={i} rtt={rtt}µs lat={}µs", rtt / 2);
    }
}
