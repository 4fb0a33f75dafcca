//! As Zenoh's z_sub_thr: counts what arrives in a callback that only counts; every `-n`
//! messages (a round) prints that round's rate; after `-s` rounds, exits.
use std::time::Instant;

use zenoh::Wait;

fn main() {
    let o = zenoh_reference::options();
    let (round, rounds) = (o.number, o.samples);
    let session = o.open();
    let mut count = 0usize;
    let mut done = 0usize;
    let mut started = Instant::now();
    let _sub = session
        .declare_subscriber(o.key.clone())
        .callback_mut(move |_sample| {
            if count == 0 {
                started = Instant::now();
                count = 1;
            } else if count < round {
                count += 1;
            } else {
                println!("{} msg/s", round as f64 / started.elapsed().as_secs_f64());
                done += 1;
                count = 0;
                if done >= rounds {
                    std::process::exit(0);
                }
            }
        })
        .wait()
        .expect("declare the subscriber");
    loop {
        std::thread::park();
    }
}
