//! Print the Gemini demo transcript: `cargo run --release -p emu-gemini --example demo`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    emu_gemini::demo::run(&mut std::io::stdout().lock())?;
    Ok(())
}
