//! Lays out pincerd's start-up code side by side (release builds on
//! x86-64 Linux, where rustc links with lld): `link/pincerd.order` lists
//! the functions pincerd runs while it starts, connects its bridges and
//! idles, and lld's `--symbol-ordering-file` puts them first. The kernel
//! maps code in 64 KB around every page a process touches, so the same
//! code spread over the binary made most of it resident; packed, it is a
//! few megabytes (docs/src/measurements.md). `bench/symbol_order.py`
//! writes the list; a stale list costs memory, never correctness.
//! `PINCER_NO_SYMBOL_ORDER=1` turns it off (a linker other than lld);
//! `PINCER_LINK_MAP=PATH` has lld write its map there (the names and
//! addresses `bench/symbol_order.py` reads; the binary is stripped).

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link/pincerd.order");
    println!("cargo:rerun-if-env-changed=PINCER_NO_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=PINCER_LINK_MAP");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    // rustc links with lld on this target from 1.90 on; before, with the
    // system's GNU ld, which has no `--symbol-ordering-file`.
    let lld_target = std::env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu")
        && rustc_minor().is_some_and(|minor| minor >= 90);
    let off = std::env::var_os("PINCER_NO_SYMBOL_ORDER").is_some_and(|v| v != "0");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let order = Path::new(&manifest).join("link").join("pincerd.order");
    if release && lld_target && !off && order.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=pincerd=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=pincerd=-Wl,--no-warn-symbol-ordering");
    }
    if let Some(map) = std::env::var_os("PINCER_LINK_MAP").filter(|_| lld_target) {
        println!(
            "cargo:rustc-link-arg-bin=pincerd=-Wl,-Map={}",
            Path::new(&map).display()
        );
    }
}

/// The minor version of the rustc cargo builds with (`1.95.0` → 95).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var_os("RUSTC")?;
    let out = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}
