//! Compiles `pincer/v1/pincer.proto` with the protoc shipped inside
//! `protoc-bin-vendored`, so no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; nothing else reads the
    // environment concurrently.
    unsafe { std::env::set_var("PROTOC", protoc) };

    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("pincer_v1_descriptor.bin"))
        .compile_protos(&["pincer/v1/pincer.proto"], &["."])?;
    println!("cargo:rerun-if-changed=pincer/v1/pincer.proto");
    Ok(())
}
