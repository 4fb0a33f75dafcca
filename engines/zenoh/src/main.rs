//! k8sdds-zenoh: Zenoh throughput and latency for k8sdds, peer to peer or through a router.
//!
//! It prints one line per second in ddsperf's format, so k8sdds reads both alike:
//!
//!   pub:  [pid] T RATE/s pub |
//!   sub:  [pid] T size S total N lost L delta n lost l rate X kS/s Y Mb/s
//!   ping: [pid] T size S mean Aus min Bus 50% Cus 90% Dus 99% Eus max Fus cnt N
//!
//! and `error: ...` lines for what went wrong. Every message carries a sequence number (its
//! first 8 bytes, big-endian), from which a subscriber counts what it lost (a publisher's
//! messages arrive in order, so a gap is a loss); a ping carries its send time. The
//! publisher (or ping) first waits until every subscriber (or pong) says on KEY/ready that it
//! has subscribed, so no test starts before its peers listen. `-mode router` is the Zenoh
//! router of the routed topology: a session in router mode, which is what zenohd runs (zenohd
//! adds plugins k8sdds does not use; the two were measured alike, docs/how-to/zenoh.md). It
//! logs Zenoh's warnings and errors on stdout as zenohd does (RUST_LOG overrides the level).
//! `-mode discover` times discovery instead (discover.rs).
use std::collections::HashSet;
use std::process::exit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod discover;

use zenoh::qos::CongestionControl;
use zenoh::{Config, Session, Wait};

struct Args {
    mode: String,
    zmode: String,
    connect: Vec<String>,
    listen: Vec<String>,
    key: String,
    size: usize,
    best_effort: bool,
    duration: f64,
    rate: u64,
    peers: usize,
    wait: f64,
    id: String,
    // -mode discover (discover.rs)
    scout: bool,
    settle: f64,
    steady: f64,
    iface: String,
    at: f64,
}

const USAGE: &str = "usage: k8sdds-zenoh -mode pub|sub|ping|pong|router [-zmode peer|client] \
[-connect EP,..] [-listen EP,..] [-key KEY] [-size BYTES] [-besteffort] [-duration S] \
[-rate N] [-peers N] [-wait S] [-id ID] | -mode discover [-zmode peer|client] [-scout] \
[-connect EP,..] [-listen EP,..] -peers N [-wait S] [-settle S] [-steady S] [-iface IFACE] \
[-at EPOCH] [-id ID] | -version";

fn fail(msg: &str) -> ! {
    println!("error: {msg}");
    exit(1)
}

fn value<T: std::str::FromStr>(flag: &str, text: Option<String>) -> T {
    let text = text.unwrap_or_else(|| fail(&format!("{flag} needs a value; {USAGE}")));
    text.parse()
        .unwrap_or_else(|_| fail(&format!("{flag} {text:?}: not a valid value; {USAGE}")))
}

fn list(text: String) -> Vec<String> {
    text.split(',').filter(|s| !s.is_empty()).map(String::from).collect()
}

fn parse_args() -> Args {
    let mut a = Args {
        mode: String::new(),
        zmode: "peer".into(),
        connect: vec![],
        listen: vec![],
        key: "k8sdds".into(),
        size: 64,
        best_effort: false,
        duration: 10.0,
        rate: 0,
        peers: 1,
        wait: 10.0,
        id: String::new(),
        scout: false,
        settle: 2.0,
        steady: 10.0,
        iface: String::new(),
        at: 0.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.trim_start_matches('-') {
            "mode" => a.mode = value(&flag, it.next()),
            "zmode" => a.zmode = value(&flag, it.next()),
            "connect" => a.connect = list(value(&flag, it.next())),
            "listen" => a.listen = list(value(&flag, it.next())),
            "key" => a.key = value(&flag, it.next()),
            "size" => a.size = value(&flag, it.next()),
            "besteffort" => a.best_effort = true,
            "duration" => a.duration = value(&flag, it.next()),
            "rate" => a.rate = value(&flag, it.next()),
            "peers" => a.peers = value(&flag, it.next()),
            "wait" => a.wait = value(&flag, it.next()),
            "id" => a.id = value(&flag, it.next()),
            "scout" => a.scout = true,
            "settle" => a.settle = value(&flag, it.next()),
            "steady" => a.steady = value(&flag, it.next()),
            "iface" => a.iface = value(&flag, it.next()),
            "at" => a.at = value(&flag, it.next()),
            "version" => {
                println!("k8sdds-zenoh 1 (zenoh {})", zenoh_version());
                exit(0)
            }
            _ => fail(&format!("unknown flag {flag:?}; {USAGE}")),
        }
    }
    if a.size < 16 {
        fail(&format!("size {}: at least 16 bytes (sequence number and send time)", a.size));
    }
    if a.id.is_empty() {
        a.id = format!("k8sdds-{}-{}", a.mode, std::process::id());
    }
    a
}

fn zenoh_version() -> &'static str {
    "1.10.2" // pinned in Cargo.toml (=1.10.2)
}

fn start() -> Instant {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *START.get_or_init(Instant::now)
}

fn line(text: String) {
    println!("[{}] {:.3} {}", std::process::id(), start().elapsed().as_secs_f64(), text);
}

fn json_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(","))
}

/// A session in `zmode`, listening and connecting where told, retrying its connections for
/// `wait` seconds (the peer or router it dials may start a moment after it).
fn open(a: &Args, zmode: &str) -> Session {
    let mut c = Config::default();
    let ms = (a.wait * 1000.0) as i64;
    let settings = [
        ("mode", format!("{zmode:?}")),
        ("scouting/multicast/enabled", "false".into()),
        ("connect/endpoints", json_list(&a.connect)),
        ("connect/timeout_ms", ms.to_string()),
        ("connect/exit_on_failure", "true".into()),
        ("connect/retry", r#"{"period_init_ms":100,"period_max_ms":500,"period_increase_factor":2}"#.into()),
    ];
    for (key, val) in settings.iter() {
        c.insert_json5(key, val).unwrap_or_else(|e| fail(&format!("config {key}={val}: {e}")));
    }
    if !a.listen.is_empty() {
        c.insert_json5("listen/endpoints", &json_list(&a.listen))
            .unwrap_or_else(|e| fail(&format!("config listen/endpoints: {e}")));
    }
    zenoh::open(c)
        .wait()
        .unwrap_or_else(|e| fail(&format!("cannot open a Zenoh {zmode} session (connect {:?}, listen {:?}): {e}", a.connect, a.listen)))
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

fn payload(size: usize, seq: u64) -> Vec<u8> {
    let mut buf = vec![0u8; size];
    buf[..8].copy_from_slice(&seq.to_be_bytes());
    buf[8..16].copy_from_slice(&now_ns().to_be_bytes());
    buf
}

/// A throughput test's messages, without an allocation each: buffers of `size` bytes
/// kept here and lent to Zenoh (a ZBytes over an `Arc` of one of them, no copy), each
/// written again with the next sequence number once Zenoh has let go of it (its `Arc` is
/// ours alone again), as Zenoh's z_pub_thr puts one payload again and again. A fresh
/// buffer per message cost about a sixth of the 1 KiB rate on 2 cores
/// (benchmarks/reference_tools.py, docs/how-to/zenoh.md).
const POOL: usize = 64; // buffers at most, whatever Zenoh holds on to

struct Messages {
    pool: Vec<Arc<Vec<u8>>>,
    size: usize,
}

impl Messages {
    fn new(size: usize) -> Self {
        Messages { pool: vec![], size }
    }

    fn next(&mut self, seq: u64) -> zenoh::bytes::ZBytes {
        use zenoh::internal::buffers::{ZBuf, ZSlice};
        let free = self.pool.iter_mut().position(|b| Arc::get_mut(b).is_some());
        let Some(at) = free.or_else(|| {
            (self.pool.len() < POOL).then(|| {
                self.pool.push(Arc::new(vec![0u8; self.size]));
                self.pool.len() - 1
            })
        }) else {
            return payload(self.size, seq).into(); // every buffer still Zenoh's: a fresh one
        };
        let buf = Arc::get_mut(&mut self.pool[at]).expect("a buffer Zenoh let go of");
        buf[..8].copy_from_slice(&seq.to_be_bytes());
        ZBuf::from(ZSlice::from(self.pool[at].clone())).into()
    }
}

fn seq_of(bytes: &[u8]) -> Option<u64> {
    bytes.get(..8).map(|b| u64::from_be_bytes(b.try_into().unwrap()))
}

fn congestion(a: &Args) -> CongestionControl {
    if a.best_effort { CongestionControl::Drop } else { CongestionControl::Block }
}

/// Returns once `peers` distinct clients have announced themselves on KEY/ready.
fn await_peers(a: &Args, session: &Session) {
    let ready = session
        .declare_subscriber(format!("{}/ready", a.key))
        .wait()
        .unwrap_or_else(|e| fail(&format!("subscribe {}/ready: {e}", a.key)));
    let deadline = Instant::now() + Duration::from_secs_f64(a.wait);
    let mut seen = HashSet::new();
    while seen.len() < a.peers {
        match ready.recv_deadline(deadline) {
            Ok(Some(s)) => {
                seen.insert(s.payload().to_bytes().into_owned());
            }
            _ => fail(&format!("{} of {} peers subscribed within {} s", seen.len(), a.peers, a.wait)),
        }
    }
}

/// Says on KEY/ready, every 200 ms until `stop`, that this client listens.
fn announce(a: &Args, session: Session, stop: Arc<AtomicBool>) {
    let key = format!("{}/ready", a.key);
    let id = a.id.clone();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let _ = session.put(&key, id.clone()).wait();
            std::thread::sleep(Duration::from_millis(200));
        }
    });
}

fn publish(a: &Args) {
    let session = open(a, &a.zmode);
    await_peers(a, &session);
    let publisher = session
        .declare_publisher(a.key.clone())
        .congestion_control(congestion(a))
        .wait()
        .unwrap_or_else(|e| fail(&format!("declare publisher {}: {e}", a.key)));
    let sent = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let (s, d) = (sent.clone(), done.clone());
    let reporter = std::thread::spawn(move || {
        let mut last = 0;
        let mut next = Instant::now() + Duration::from_secs(1);
        while !d.load(Ordering::Relaxed) {
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            next += Duration::from_secs(1);
            let now = s.load(Ordering::Relaxed);
            line(format!("{}/s pub |", now - last));
            last = now;
        }
    });
    let end = Instant::now() + Duration::from_secs_f64(a.duration);
    let interval = if a.rate > 0 { Some(Duration::from_secs_f64(1.0 / a.rate as f64)) } else { None };
    let mut next = Instant::now();
    let mut seq = 0u64;
    let mut messages = Messages::new(a.size);
    // the clock is read every 256 messages at full rate, after each one when paced
    while interval.is_some() || seq % 256 != 0 || Instant::now() < end {
        if let Err(e) = publisher.put(messages.next(seq)).wait() {
            fail(&format!("put: {e}"));
        }
        seq += 1;
        sent.store(seq, Ordering::Relaxed);
        if let Some(step) = interval {
            next += step;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            if Instant::now() >= end {
                break;
            }
        }
    }
    done.store(true, Ordering::Relaxed);
    let _ = reporter.join();
    let _ = session.close().wait();
}

#[derive(Default)]
struct Counts {
    expect: u64,
    total: u64,
    lost: u64,
    delta: u64,
    delta_lost: u64,
    bytes: u64,
}

fn subscribe(a: &Args) {
    let session = open(a, &a.zmode);
    let counts = Arc::new(Mutex::new(Counts::default()));
    let c = counts.clone();
    let _sub = session
        .declare_subscriber(a.key.clone())
        .callback(move |sample| {
            let p = sample.payload().to_bytes();
            let Some(seq) = seq_of(&p) else { return };
            let mut c = c.lock().unwrap();
            if seq > c.expect {
                let gap = seq - c.expect;
                c.lost += gap;
                c.delta_lost += gap;
            }
            if seq >= c.expect {
                c.expect = seq + 1;
            }
            c.total += 1;
            c.delta += 1;
            c.bytes += p.len() as u64;
        })
        .wait()
        .unwrap_or_else(|e| fail(&format!("subscribe {}: {e}", a.key)));
    let stop = Arc::new(AtomicBool::new(false));
    announce(a, session.clone(), stop.clone());
    let mut next = Instant::now() + Duration::from_secs(1);
    let mut started = false;
    loop {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += Duration::from_secs(1);
        let mut c = counts.lock().unwrap();
        if c.total > 0 && !started {
            started = true;
            stop.store(true, Ordering::Relaxed); // the publisher is sending: it heard us
        }
        if started {
            line(format!(
                "size {} total {} lost {} delta {} lost {} rate {:.2} kS/s {:.2} Mb/s",
                a.size, c.total, c.lost, c.delta, c.delta_lost,
                c.delta as f64 / 1e3, c.bytes as f64 * 8.0 / 1e6
            ));
        }
        c.delta = 0;
        c.delta_lost = 0;
        c.bytes = 0;
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[(p / 100.0 * (sorted.len() - 1) as f64) as usize]
}

fn report(a: &Args, rtts: &mut Vec<f64>) {
    if rtts.is_empty() {
        return;
    }
    rtts.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
    line(format!(
        "size {} mean {:.3}us min {:.3}us 50% {:.3}us 90% {:.3}us 99% {:.3}us max {:.3}us cnt {}",
        a.size, mean, rtts[0], percentile(rtts, 50.0), percentile(rtts, 90.0),
        percentile(rtts, 99.0), rtts[rtts.len() - 1], rtts.len()
    ));
    rtts.clear();
}

fn ping(a: &Args) {
    let session = open(a, &a.zmode);
    let pongs = session
        .declare_subscriber(format!("{}/pong", a.key))
        .wait()
        .unwrap_or_else(|e| fail(&format!("subscribe {}/pong: {e}", a.key)));
    await_peers(a, &session);
    let publisher = session
        .declare_publisher(format!("{}/ping", a.key))
        .congestion_control(congestion(a))
        .express(true)
        .wait()
        .unwrap_or_else(|e| fail(&format!("declare publisher {}/ping: {e}", a.key)));
    let end = Instant::now() + Duration::from_secs_f64(a.duration);
    let mut next_line = Instant::now() + Duration::from_secs(1);
    let mut rtts = Vec::new();
    let mut seq = 0u64;
    while Instant::now() < end {
        let sent_at = Instant::now();
        if let Err(e) = publisher.put(payload(a.size, seq)).wait() {
            fail(&format!("put: {e}"));
        }
        let deadline = sent_at + Duration::from_secs(1);
        // one pong per ping: with more pongs, the first reply counts
        while let Ok(Some(reply)) = pongs.recv_deadline(deadline) {
            if seq_of(&reply.payload().to_bytes()) == Some(seq) {
                rtts.push(sent_at.elapsed().as_nanos() as f64 / 1e3);
                break;
            }
        }
        seq += 1;
        if Instant::now() >= next_line {
            report(a, &mut rtts);
            next_line += Duration::from_secs(1);
        }
    }
    report(a, &mut rtts);
    let _ = session.close().wait();
}

fn pong(a: &Args) {
    let session = open(a, &a.zmode);
    let publisher = session
        .declare_publisher(format!("{}/pong", a.key))
        .congestion_control(congestion(a))
        .express(true)
        .wait()
        .unwrap_or_else(|e| fail(&format!("declare publisher {}/pong: {e}", a.key)));
    let _sub = session
        .declare_subscriber(format!("{}/ping", a.key))
        .callback(move |sample| {
            let _ = publisher.put(sample.payload().clone()).wait();
        })
        .wait()
        .unwrap_or_else(|e| fail(&format!("subscribe {}/ping: {e}", a.key)));
    let stop = Arc::new(AtomicBool::new(false));
    announce(a, session.clone(), stop.clone());
    std::thread::sleep(Duration::from_secs_f64(a.wait));
    stop.store(true, Ordering::Relaxed);
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn router(a: &Args) {
    zenoh::init_log_from_env_or("warn");
    let _session = open(a, "router");
    line("router up".into());
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn main() {
    start();
    let a = parse_args();
    match a.mode.as_str() {
        "pub" => publish(&a),
        "sub" => subscribe(&a),
        "ping" => ping(&a),
        "pong" => pong(&a),
        "router" => router(&a),
        "discover" => discover::discover(&a),
        m => fail(&format!("mode {m:?}: pub, sub, ping, pong, router or discover; {USAGE}")),
    }
}
