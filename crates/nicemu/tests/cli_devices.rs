//! `nicemu devices` lists the emulated NICs as their drivers probed them, and real NICs found
//! in a sysfs tree with their driver binding.

use std::path::Path;
use std::process::Command;

fn fake_function(root: &Path, bdf: &str, vendor: &str, device: &str, driver: Option<&str>) {
    let dir = root.join("bus/pci/devices").join(bdf);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
    std::fs::write(dir.join("device"), format!("{device}\n")).unwrap();
    std::fs::write(dir.join("class"), "0x020000\n").unwrap();
    std::fs::write(dir.join("revision"), "0x02\n").unwrap();
    if let Some(d) = driver {
        let drv = root.join("bus/pci/drivers").join(d);
        std::fs::create_dir_all(&drv).unwrap();
        std::os::unix::fs::symlink(&drv, dir.join("driver")).unwrap();
    }
}

#[test]
fn lists_emulated_and_real_devices_with_bindings() {
    let root = std::env::temp_dir().join(format!("nicemu-sysfs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    fake_function(&root, "0000:41:00.0", "0x17db", "0x0501", Some("cxi_ss1"));
    fake_function(&root, "0000:42:00.0", "0x8086", "0x1572", Some("i40e"));
    let out = Command::new(env!("CARGO_BIN_EXE_nicemu"))
        .args(["devices", "--cassini", "2", "--gemini", "2", "--sysfs"])
        .arg(&root)
        .output()
        .expect("run nicemu");
    let _ = std::fs::remove_dir_all(&root);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.matches("17db:0501  Cassini 1").count(), 3, "{text}");
    // Two emulated functions bound by the driver, one real function bound in sysfs.
    assert_eq!(text.matches("driver cxi_ss1").count(), 3, "{text}");
    assert_eq!(text.matches("driver kgni").count(), 2, "{text}");
    assert!(text.contains("0000:41:00.0"), "{text}");
    assert!(
        !text.contains("0000:42:00.0"),
        "a non-NIC function is not listed: {text}"
    );
}

#[test]
fn odd_gemini_count_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_nicemu"))
        .args(["devices", "--gemini", "3"])
        .output()
        .expect("run nicemu");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("must be even"));
}
