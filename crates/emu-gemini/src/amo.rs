//! AMOs at the target NIC: the Gemini first-generation 64-bit command set
//! (`firmware_spec::gemini::amo::AmoCmd`, `gni_pub.h` codes).
//!
//! The model handles one packet at a time per NIC, and the update itself is a
//! compare-and-swap on the host word, so an AMO is atomic with respect to other AMOs at this
//! NIC and to CPU atomics on the same word. Cached (`_C`) variants execute like the plain ones:
//! the model's AMO cache is write-through.

use crate::fault::Fault;
use crate::mdd::{Access, Domains, fetch_update};
use emu_core::dma::DmaPort;
use firmware_spec::gemini::amo::{AmoCmd, target_aligned};

/// Execute AMO `code` on the 8-byte word at `offset` of the domain named by `acc`; returns
/// the old value. Fails without touching memory on an unknown or Aries-only command, a
/// misaligned target, or any domain check.
pub fn execute(
    domains: &Domains,
    dma: &DmaPort,
    acc: Access,
    offset: u64,
    code: u16,
    op1: u64,
    op2: u64,
) -> Result<u64, Fault> {
    let cmd = AmoCmd::decode(u32::from(code)).map_err(|_| Fault::BadCommand)?;
    if !target_aligned(offset) {
        return Err(Fault::Misaligned);
    }
    domains.atomic(dma, acc, offset, |w| {
        fetch_update(w, |old| cmd.apply(old, op1, op2))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu_core::memory::HostMemory;
    use firmware_spec::gemini::mdd::{MddDescriptor, MddModes};

    #[test]
    fn every_command_applies_its_operation() {
        let dma = DmaPort::passthrough(HostMemory::new(1 << 20).unwrap());
        let mut d = Domains::default();
        let desc = MddDescriptor {
            ptag: 3,
            mem_base: 0x10,
            max_base: 0x10,
            modes: u64::from((MddModes::VALID | MddModes::WRITABLE).bits()),
            ..Default::default()
        };
        let b = desc.encode().unwrap();
        d.write_mdd(4, 0, u64::from_le_bytes(b[..8].try_into().unwrap()));
        d.write_mdd(4, 1, u64::from_le_bytes(b[8..].try_into().unwrap()));
        let acc = Access {
            mdh: 4,
            vmdh: false,
            ptag: 3,
        };
        for (i, cmd) in AmoCmd::ALL.iter().enumerate() {
            let off = 8 * i as u64;
            let (init, op1, op2) = (0xF0F0_1234u64, 0x0FF0_1234u64, 0x55u64);
            dma.write_u64(0x10_000 + off, init).unwrap();
            let old = execute(&d, &dma, acc, off, cmd.code() as u16, op1, op2).unwrap();
            assert_eq!(old, init, "{cmd:?}");
            assert_eq!(
                dma.read_u64(0x10_000 + off).unwrap(),
                cmd.apply(init, op1, op2),
                "{cmd:?}"
            );
        }
        assert_eq!(
            execute(&d, &dma, acc, 4, 0x008, 1, 0),
            Err(Fault::Misaligned)
        );
        assert_eq!(
            execute(&d, &dma, acc, 0, 0x041, 1, 0),
            Err(Fault::BadCommand)
        );
        assert_eq!(
            execute(&d, &dma, acc, 0, 0x00E, 1, 0),
            Err(Fault::BadCommand)
        );
        assert_eq!(
            execute(&d, &dma, acc, 0x1000, 0x008, 1, 0),
            Err(Fault::Bounds)
        );
    }
}
