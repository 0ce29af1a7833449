//! Prints the two-node Cassini exchange: `cargo run -p emu-cassini --example cassini_demo`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    emu_cassini::demo::run(&mut std::io::stdout())?;
    Ok(())
}
