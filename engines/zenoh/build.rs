//! Nothing to build: the file is here so that rustc_version, zenohd's build-time crate, is
//! resolved and compiled as zenohd's build resolves and compiles it (see Cargo.toml).
fn main() {
    let _ = rustc_version::version_meta();
}
