//! Writes the PTX NVRTC makes of each shape named on the command line (`kernel/block/per_thread`) for
//! one compute capability, one file per shape, so that `ptxas` can report its registers and spills.
//! Usage: `cargo run -p nqueens-gpu --example ptx -- OUTDIR 90 flat/128/4 stream/128/8 ...`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: ptx OUTDIR CC SHAPE...";
    let out = std::path::PathBuf::from(args.next().ok_or(usage)?);
    let cc: u32 = args.next().ok_or(usage)?.parse()?;
    std::fs::create_dir_all(&out)?;
    for s in args {
        let shape: nqueens_gpu::Shape = s.parse()?;
        let ptx = nqueens_gpu::cuda::compile(((cc / 10) as i32, (cc % 10) as i32), &shape)?;
        let file = out.join(format!("{}.ptx", s.replace('/', "-")));
        std::fs::write(&file, ptx.to_src())?;
        println!("{}", file.display());
    }
    Ok(())
}
