//! `-mode discover`: how long one Zenoh session takes to discover its peers, and what that
//! costs its network interface, in k8sdds-discovery's lines (engines/discovery/discovery.c),
//! so k8sdds reads both alike.
//!
//! Each participant of a test runs one: a session (a peer, or a client of the router) that
//! declares a liveliness token `k8sdds/discovery/ID` and subscribes to every other's, with
//! their history. Zenoh has no readers and writers to match; a liveliness token is what its
//! peers discover (rmw_zenoh builds ROS 2's graph from them). From its start (before the
//! session opens) it records each time the number of peer tokens it knows changes and when
//! it knows every peer's: that is its discovery time. The interface's counters are read as
//! k8sdds-discovery reads them: at the start, at that moment, and over a steady window.
//!
//! Lines (times in seconds from its start):
//!   k8sdds-discovery 1 zenoh VERSION
//!   start iface IFACE late L epoch E
//!   participants T SEEN/N      (each time the number of peer tokens changes)
//!   discovered T
//!   traffic discovery|steady SECONDS TX_BYTES TX_PACKETS RX_BYTES RX_PACKETS
//!   timeout T SEEN/N           (instead of discovered, then exit status 1)
use std::collections::HashSet;
use std::process::exit;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use zenoh::sample::SampleKind;
use zenoh::{Config, Wait};

use crate::{fail, json_list, zenoh_version, Args};

const KEY: &str = "k8sdds/discovery";
const TICK: Duration = Duration::from_millis(20);

#[derive(Clone, Copy, Default)]
struct Counters {
    tx_bytes: u64,
    tx_packets: u64,
    rx_bytes: u64,
    rx_packets: u64,
}

fn counters(iface: &str) -> Counters {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{iface}/statistics/{name}"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| fail(&format!("cannot read {name} of interface {iface:?}")))
    };
    Counters {
        tx_bytes: read("tx_bytes"),
        tx_packets: read("tx_packets"),
        rx_bytes: read("rx_bytes"),
        rx_packets: read("rx_packets"),
    }
}

/// The interface of the default route (/proc/net/route), as k8sdds-discovery picks it.
fn default_interface() -> String {
    let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    routes
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.len() > 1 && w[1] == "00000000")
        .map(|w| w[0].to_string())
        .unwrap_or_else(|| fail("no default route: give -iface"))
}

fn traffic(phase: &str, seconds: f64, from: Counters, to: Counters) {
    println!(
        "traffic {phase} {seconds:.6} {} {} {} {}",
        to.tx_bytes - from.tx_bytes,
        to.tx_packets - from.tx_packets,
        to.rx_bytes - from.rx_bytes,
        to.rx_packets - from.rx_packets
    );
}

fn wall() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Sleep until the wall-clock instant `at` (0: none); how late it is once there.
fn start_at(at: f64) -> f64 {
    if at <= 0.0 {
        return 0.0;
    }
    let left = at - wall();
    if left > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(left));
    }
    (wall() - at).max(0.0)
}

fn config(a: &Args, iface: &str) -> Config {
    let mut c = Config::default();
    let ms = (a.wait * 1000.0) as i64;
    let mut settings = vec![
        ("mode", format!("{:?}", a.zmode)),
        ("scouting/multicast/enabled", a.scout.to_string()),
        ("connect/endpoints", json_list(&a.connect)),
        ("connect/timeout_ms", ms.to_string()),
        ("connect/exit_on_failure", "true".into()),
        ("connect/retry", r#"{"period_init_ms":100,"period_max_ms":500,"period_increase_factor":2}"#.into()),
    ];
    if a.scout {
        settings.push(("scouting/multicast/interface", format!("{iface:?}")));
    }
    if !a.connect.is_empty() && a.zmode == "peer" {
        // a peers list: each pair is dialed once (k8sdds has the later started dial the
        // earlier). A peer that also dialed what gossip told it raced that dial; the loser's
        // second link is refused (one link a pair), and a refused dial is retried until
        // connect/timeout_ms: a session that never opened
        settings.push(("scouting/gossip/autoconnect", r#"{router: [], peer: [], client: []}"#.into()));
    }
    if !a.listen.is_empty() {
        settings.push(("listen/endpoints", json_list(&a.listen)));
    }
    for (key, val) in settings.iter() {
        c.insert_json5(key, val).unwrap_or_else(|e| fail(&format!("config {key}={val}: {e}")));
    }
    c
}

pub fn discover(a: &Args) {
    let iface = if a.iface.is_empty() { default_interface() } else { a.iface.clone() };
    println!("k8sdds-discovery 1 zenoh {}", zenoh_version());
    let late = start_at(a.at);
    let t0 = Instant::now();
    let since = || t0.elapsed().as_secs_f64();
    println!("start iface {iface} late {late:.6} epoch {:.6}", wall());
    let at_start = counters(&iface);
    let session = zenoh::open(config(a, &iface))
        .wait()
        .unwrap_or_else(|e| fail(&format!("cannot open a Zenoh {} session: {e}", a.zmode)));
    let own = format!("{KEY}/{}", a.id);
    let _token = session
        .liveliness()
        .declare_token(&own)
        .wait()
        .unwrap_or_else(|e| fail(&format!("declare liveliness token {own}: {e}")));
    let tokens = session
        .liveliness()
        .declare_subscriber(format!("{KEY}/*"))
        .history(true)
        .wait()
        .unwrap_or_else(|e| fail(&format!("subscribe to liveliness {KEY}/*: {e}")));
    let mut seen: HashSet<String> = HashSet::new();
    let mut said = usize::MAX;
    let matched_at = loop {
        let t = since();
        if seen.len() != said {
            said = seen.len();
            println!("participants {t:.6} {said}/{}", a.peers);
        }
        if seen.len() >= a.peers {
            break t;
        }
        if t >= a.wait {
            println!("timeout {t:.6} {}/{}", seen.len(), a.peers);
            let _ = session.close().wait();
            exit(1);
        }
        if let Ok(Some(sample)) = tokens.recv_timeout(TICK) {
            let key = sample.key_expr().as_str().to_string();
            if key != own {
                match sample.kind() {
                    SampleKind::Put => seen.insert(key),
                    SampleKind::Delete => seen.remove(&key),
                };
            }
        }
    };
    let at_match = counters(&iface);
    println!("discovered {matched_at:.6}");
    traffic("discovery", matched_at, at_start, at_match);
    std::thread::sleep(Duration::from_secs_f64(a.settle));
    let before = counters(&iface);
    let from = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(a.steady));
    traffic("steady", from.elapsed().as_secs_f64(), before, counters(&iface));
    std::thread::sleep(Duration::from_secs_f64(a.settle));
    let _ = session.close().wait();
}
