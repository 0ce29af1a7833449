//! The PCI function: identity, BAR sizing, MSI-X, interrupts from a CQ, and MMIO edge
//! cases (bad widths, unmapped space, disabled descriptors).

mod common;

use common::*;
use emu_core::engine::Engine;
use emu_core::mmio::MmioError;
use emu_gemini::host::{PostOpts, Remote};
use firmware_spec::gemini::cq::CqDescriptor;
use firmware_spec::gemini::{fma, gni::ReturnCode, map, pci};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[test]
fn identity_and_bars() {
    let c = det([1, 1, 1], 61);
    let e = &c.engine;
    let dev = c.nics[1].dev;
    let id = e.config_read(dev, 0).unwrap();
    assert_eq!(id, 0x0201_17DB);
    assert_eq!(e.config_read(dev, 2).unwrap() >> 8, pci::CLASS_CODE);
    // BAR sizing: write all ones, read back the size mask (BAR0 is 64-bit, 256 GiB).
    e.config_write(dev, 4, u32::MAX).unwrap();
    e.config_write(dev, 5, u32::MAX).unwrap();
    let lo = u64::from(e.config_read(dev, 4).unwrap() & !0xF);
    let hi = u64::from(e.config_read(dev, 5).unwrap());
    assert_eq!(!((hi << 32) | lo) + 1, map::ADDRESS_SPACE_SIZE);
    assert_eq!(e.bar_size(dev, 0).unwrap(), map::ADDRESS_SPACE_SIZE);
    assert_eq!(e.bar_size(dev, 2).unwrap(), 0x1000);
    assert_eq!(e.bar_size(dev, 1).unwrap(), 0);
    assert_eq!(c.nics[1].node_id().unwrap(), 1);
}

fn msix_cap(e: &Arc<dyn Engine>, dev: emu_core::engine::DeviceId) -> u16 {
    let mut p = (e.config_read(dev, 0x34 / 4).unwrap() & 0xFC) as u16;
    while p != 0 {
        let h = e.config_read(dev, p / 4).unwrap();
        if h & 0xFF == 0x11 {
            return p;
        }
        p = ((h >> 8) & 0xFC) as u16;
    }
    panic!("no MSI-X capability");
}

#[test]
fn cq_interrupt_through_msix() {
    let mut j = job(det([1, 1, 1], 62));
    let e = j.c.engine.clone();
    let n1 = j.nic(1).clone();
    let hits = Arc::new(AtomicU64::new(0));
    let h = hits.clone();
    e.set_interrupt_sink(
        n1.dev,
        Arc::new(move |v| {
            h.fetch_add(1 << (8 * u32::from(v % 8)), Ordering::SeqCst);
        }),
    )
    .unwrap();
    // Enable MSI-X, unmask vector 5, arm the remote CQ's interrupt on vector 5.
    let cap = msix_cap(&e, n1.dev);
    let ctl = e.config_read(n1.dev, cap / 4).unwrap();
    e.config_write(n1.dev, cap / 4, ctl | (1 << 31)).unwrap();
    let vec5 = 5 * 16;
    let bar2 = e.mmio(n1.dev, 2).unwrap();
    bar2.write_u32(vec5, 0xFEE0_0000).unwrap();
    bar2.write_u32(vec5 + 8, 0x55).unwrap();
    bar2.write_u32(vec5 + 12, 0).unwrap();
    let at = map::CQ_BASE + map::CQ_PITCH * u64::from(REMOTE_CQ);
    let mut d = CqDescriptor::decode(
        &[
            n1.bar0.read_u64(at).unwrap(),
            n1.bar0.read_u64(at + 8).unwrap(),
            n1.bar0.read_u64(at + 16).unwrap(),
        ]
        .iter()
        .flat_map(|q| q.to_le_bytes())
        .collect::<Vec<u8>>(),
    )
    .unwrap();
    d.irq_req_index = 5;
    d.irq_req = 1;
    let b = d.encode().unwrap();
    let q = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    n1.bar0.write_u64(at + 16, q(2)).unwrap();
    // qword 1 rewritten with enable still set: no reset.
    n1.bar0.write_u64(at + 8, q(1)).unwrap();
    let o = PostOpts {
        sync: fma::SyncType::REMOTE_EVENT | fma::SyncType::LOCAL_EVENT,
        ..PostOpts::default()
    };
    let to = Remote {
        pe: 1,
        mdh: BUF_MDH,
        offset: 0,
    };
    let n0 = j.nic(0).clone();
    n0.fma_put(j.nodes[0].fma, to, &[1; 8], o).unwrap();
    n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    n1.cq_wait(&mut j.nodes[1].remote_cq).unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 1 << (8 * 5));
    // One shot: a second event raises nothing until re-armed.
    n0.fma_put(j.nodes[0].fma, to, &[1; 8], o).unwrap();
    n1.cq_wait(&mut j.nodes[1].remote_cq).unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 1 << (8 * 5));
}

#[test]
fn mmio_edge_cases() {
    let j = job(det([1, 1, 1], 63));
    let n0 = j.nic(0);
    let mut b3 = [0u8; 3];
    assert!(matches!(
        n0.bar0.read(map::NODE_ID_OFFSET, &mut b3),
        Err(MmioError::BadWidth { .. })
    ));
    assert!(matches!(
        n0.bar0.write(map::NODE_ID_OFFSET + 4, &[0u8; 8]),
        Err(MmioError::Misaligned { .. })
    ));
    // Unmapped space reads 0 and ignores stores.
    n0.bar0
        .write_u64(map::LOCAL_BLOCK_SIZE + 0x1000, 5)
        .unwrap();
    assert_eq!(n0.bar0.read_u64(map::LOCAL_BLOCK_SIZE + 0x1000).unwrap(), 0);
    // The GET window takes only 8-byte GCWs.
    let get = fma::window_addr(fma::WindowKind::Get, 0, 0).unwrap();
    assert!(matches!(
        n0.bar0.write_u32(get, 1),
        Err(MmioError::BadWidth { .. })
    ));
    // A descriptor that was never allocated refuses window stores.
    let put = fma::window_addr(fma::WindowKind::PutUc, 9, 0).unwrap();
    n0.bar0.write_u64(put, 1).unwrap();
    let err = map::FMA_DESC_USER_BASE + 9 * map::DESC_PAGE_SIZE + emu_gemini::regs::FMA_ERR_RC;
    assert_eq!(
        n0.bar0.read_u64(err).unwrap(),
        u64::from(ReturnCode::InvalidState.code())
    );
    // 4-byte halves of a register merge.
    let mdd = map::MDD_BASE + 16 * 100;
    n0.bar0.write_u32(mdd, 0xAAAA_BBBB).unwrap();
    n0.bar0.write_u32(mdd + 4, 0x0000_CCCC).unwrap();
    assert_eq!(n0.bar0.read_u64(mdd).unwrap(), 0x0000_CCCC_AAAA_BBBB);
}

#[test]
fn user_alias_cannot_change_privileged_fields() {
    let j = job(det([1, 1, 1], 64));
    let n0 = j.nic(0);
    let id = j.nodes[0].fma.id;
    let user = map::FMA_DESC_USER_BASE + u64::from(id) * map::DESC_PAGE_SIZE;
    let privileged = map::FMA_DESC_BASE + u64::from(id) * map::DESC_PAGE_SIZE;
    let before = n0.bar0.read_u64(privileged + fma::reg::QW3).unwrap();
    // Try to change ptags, CQ handle and NTT through the user alias.
    n0.bar0.write_u64(user + fma::reg::QW3, u64::MAX).unwrap();
    assert_eq!(
        n0.bar0.read_u64(privileged + fma::reg::QW3).unwrap(),
        before
    );
    // FMA enable is privileged too; the command field is not.
    let qw2 = n0.bar0.read_u64(user + fma::reg::QW2).unwrap();
    n0.bar0.write_u64(user + fma::reg::QW2, 0x1F).unwrap();
    let now = n0.bar0.read_u64(user + fma::reg::QW2).unwrap();
    assert_eq!(now & 0x1F, 0x1F);
    assert_eq!(now >> 58 & 0x4, qw2 >> 58 & 0x4);
    assert_ne!(now >> 58 & 0x4, 0, "still enabled");
    // The privileged page can.
    n0.bar0.write_u64(privileged + fma::reg::QW3, 0).unwrap();
    assert_eq!(n0.bar0.read_u64(privileged + fma::reg::QW3).unwrap(), 0);
}
