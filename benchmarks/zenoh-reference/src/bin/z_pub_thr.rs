//! As Zenoh's z_pub_thr: one payload made once, put in a tight loop (congestion control
//! Block), `-t` prints the rate every `-n` messages.
use zenoh::qos::CongestionControl;
use zenoh::Wait;

fn main() {
    let o = zenoh_reference::options();
    let data = zenoh_reference::payload(o.size());
    let session = o.open();
    let publisher = session
        .declare_publisher(o.key.clone())
        .congestion_control(CongestionControl::Block)
        .express(o.express)
        .wait()
        .expect("declare the publisher");
    let mut count = 0usize;
    let mut start = std::time::Instant::now();
    loop {
        publisher.put(data.clone()).wait().expect("put");
        if o.print {
            if count < o.number {
                count += 1;
            } else {
                println!("{} msg/s", count as f64 / start.elapsed().as_secs_f64());
                count = 0;
                start = std::time::Instant::now();
            }
        }
    }
}
