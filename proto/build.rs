//! Compiles the `pincer.v1` API (one `.proto` file per service under
//! `pincer/v1/`) with the protoc shipped inside `protoc-bin-vendored`, so
//! no system protoc is needed.

/// One file per service; all share the package `pincer.v1`, so the
/// generated Rust is one module whatever file a message lives in.
const PROTOS: &[&str] = &[
    "pincer/v1/agent.proto",
    "pincer/v1/sessions.proto",
    "pincer/v1/daemon.proto",
    "pincer/v1/tools.proto",
    "pincer/v1/memory.proto",
    "pincer/v1/skills.proto",
    "pincer/v1/channels.proto",
    "pincer/v1/workflows.proto",
    "pincer/v1/schedules.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; nothing else reads the
    // environment concurrently.
    unsafe { std::env::set_var("PROTOC", protoc) };

    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("pincer_v1_descriptor.bin"))
        .compile_protos(PROTOS, &["."])?;
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    Ok(())
}
