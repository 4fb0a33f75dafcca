//! What the four programs share: a Zenoh session from the command line as Zenoh's examples
//! take it (`-m peer|client`, `-e ENDPOINT`, `-l ENDPOINT`, `--no-multicast-scouting`, `-n`,
//! `-s`, `-w`, `-t`, `--express`; `-k KEY` for the throughput key, `test/thr` as theirs), and
//! the payload they send (`0, 1, ..., 9, 0, 1, ...`, made once, cloned for every put).
use zenoh::bytes::ZBytes;
use zenoh::{Config, Session, Wait};

pub struct Options {
    pub positional: Vec<String>,
    pub number: usize,
    pub samples: usize,
    pub warmup: f64,
    pub express: bool,
    pub print: bool,
    pub key: String,
    config: Config,
}

pub fn options() -> Options {
    let mut config = Config::default();
    let mut o = Options { positional: vec![], number: 100_000, samples: 10, warmup: 1.0,
                          express: false, print: false,
                          key: "test/thr".into(), config: Config::default() };
    let mut connect: Vec<String> = vec![];
    let mut listen: Vec<String> = vec![];
    let mut it = std::env::args().skip(1);
    let need = |flag: &str, v: Option<String>| v.unwrap_or_else(|| panic!("{flag} needs a value"));
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-m" | "--mode" => {
                let mode = need(&arg, it.next());
                config.insert_json5("mode", &format!("{mode:?}")).expect("mode");
            }
            "-e" | "--connect" => connect.push(need(&arg, it.next())),
            "-l" | "--listen" => listen.push(need(&arg, it.next())),
            "-n" | "--number" => o.number = need(&arg, it.next()).parse().expect("number"),
            "-s" | "--samples" => o.samples = need(&arg, it.next()).parse().expect("samples"),
            "-w" | "--warmup" => o.warmup = need(&arg, it.next()).parse().expect("warmup"),
            "--express" => o.express = true,
            "-t" | "--print" => o.print = true,
            "-k" | "--key" => o.key = need(&arg, it.next()),
            "--no-multicast-scouting" => {
                config.insert_json5("scouting/multicast/enabled", "false").expect("scouting");
            }
            _ => o.positional.push(arg),
        }
    }
    let quoted = |l: &[String]| format!("[{}]", l.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join(","));
    if !connect.is_empty() {
        config.insert_json5("connect/endpoints", &quoted(&connect)).expect("connect");
    }
    if !listen.is_empty() {
        config.insert_json5("listen/endpoints", &quoted(&listen)).expect("listen");
    }
    o.config = config;
    o
}

impl Options {
    pub fn open(&self) -> Session {
        zenoh::open(self.config.clone()).wait().expect("open a Zenoh session")
    }

    pub fn size(&self) -> usize {
        self.positional.first().expect("PAYLOAD_SIZE").parse().expect("PAYLOAD_SIZE")
    }
}

pub fn payload(size: usize) -> ZBytes {
    (0..size).map(|i| (i % 10) as u8).collect::<Vec<u8>>().into()
}
