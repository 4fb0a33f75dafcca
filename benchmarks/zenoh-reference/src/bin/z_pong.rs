//! As Zenoh's z_pong: every sample on test/ping put back on test/pong from the callback.
use zenoh::qos::CongestionControl;
use zenoh::Wait;

fn main() {
    let o = zenoh_reference::options();
    let session = o.open();
    let publisher = session
        .declare_publisher("test/pong")
        .congestion_control(CongestionControl::Block)
        .express(o.express)
        .wait()
        .expect("declare the publisher");
    let _sub = session
        .declare_subscriber("test/ping")
        .callback(move |sample| publisher.put(sample.payload().clone()).wait().expect("put"))
        .wait()
        .expect("subscribe test/ping");
    loop {
        std::thread::park();
    }
}
