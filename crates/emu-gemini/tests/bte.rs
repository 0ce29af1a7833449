//! BTE transfers between emulated NICs on the deterministic engine: PUT and GET with local,
//! global and remote events, several channels at once, FENCE, alignment errors, SEND into
//! RX channels with immediate data.

mod common;

use common::*;
use emu_gemini::host::{Local, Nic, Region, Remote, rdma_txd};
use firmware_spec::gemini::bte::{TxDescriptor, TxdMode1};
use firmware_spec::gemini::cqe::{CqeSource, HwStatus};
use firmware_spec::gemini::gni::ReturnCode;

const BIG_MDH: u16 = 3;
const BIG: u64 = 8 << 20;

fn big(nic: &Nic, cq: Option<u16>) -> Region {
    let a = nic.alloc(BIG).unwrap();
    nic.register(BIG_MDH, PTAG, a, BIG, true, cq).unwrap()
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9) >> 7 ^ seed) as u8)
        .collect()
}

fn txd(
    op: TxdMode1,
    local: &Region,
    remote: (u32, &Region),
    len: u64,
    ev: TxdMode1,
    tag: u64,
) -> TxDescriptor {
    rdma_txd(
        op,
        PTAG,
        Local {
            mdh: local.mdh,
            offset: local.off(0),
        },
        Remote {
            pe: remote.0,
            mdh: remote.1.mdh,
            offset: remote.1.off(0),
        },
        len,
        LOCAL_CQ,
        ev,
        tag,
        tag | 0x1000,
    )
}

#[test]
fn put_and_get_with_local_global_and_remote_events() {
    let mut j = job(det([2, 1, 1], 11));
    let (n0, n3) = (j.nic(0).clone(), j.nic(3).clone());
    let src = big(&n0, None);
    let dst = big(&n3, Some(REMOTE_CQ));
    let len = 3 * 1024 * 1024 + 3; // PUT has no alignment rule
    let data = pattern(1, len as usize);
    n0.write_mem(src.addr, &data).unwrap();
    let mut ch = n0.bte_enable(0, 0, 16, 0, false).unwrap();
    let ev = TxdMode1::CQ_LOCAL | TxdMode1::CQ_GLOBAL;
    n0.bte_post(&mut ch, &txd(TxdMode1::PUT, &src, (3, &dst), len, ev, 0x21))
        .unwrap();
    let t0 = j.c.now();
    let local = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(local.source(), Ok(CqeSource::Bte));
    assert_eq!((local.status(), local.data()), (Ok(HwStatus::Ok), 0x21));
    let global = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((global.status(), global.data()), (Ok(HwStatus::Ok), 0x1021));
    let remote = n3.cq_wait(&mut j.nodes[3].remote_cq).unwrap();
    assert_eq!(
        (remote.source(), remote.data()),
        (Ok(CqeSource::RmtDreq), 0x1021)
    );
    let mut got = vec![0u8; len as usize];
    n3.read_mem(dst.addr, &mut got).unwrap();
    assert!(got == data, "PUT data differs");
    // Paced at 6.911 GB/s: 3 MiB takes at least ~450 us of virtual time.
    let took = j.c.now().since(t0).as_ns();
    assert!(took >= 400_000, "took {took} ns");
    assert_eq!(n0.bte_completed(0).unwrap(), 1);

    // GET 1 MiB back from node 3 (aligned), into the start of the source buffer.
    let back = 1 << 20;
    n0.write_mem(src.addr, &vec![0u8; back as usize]).unwrap();
    n0.bte_post(
        &mut ch,
        &txd(
            TxdMode1::GET,
            &src,
            (3, &dst),
            back,
            TxdMode1::CQ_GLOBAL,
            0x22,
        ),
    )
    .unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::Ok), 0x1022));
    let mut got = vec![0u8; back as usize];
    n0.read_mem(src.addr, &mut got).unwrap();
    assert!(got[..] == data[..back as usize], "GET data differs");
    // A GET raises no remote event.
    assert_eq!(n3.cq_poll(&mut j.nodes[3].remote_cq).unwrap(), None);
}

#[test]
fn three_channels_progress_together() {
    let mut j = job(det([2, 1, 1], 12));
    let n0 = j.nic(0).clone();
    let srcs: Vec<Region> = (0..3)
        .map(|k| {
            let a = n0.alloc(1 << 20).unwrap();
            n0.write_mem(a, &pattern(k, 1 << 20)).unwrap();
            n0.register(10 + k as u16, PTAG, a, 1 << 20, false, None)
                .unwrap()
        })
        .collect();
    let dsts: Vec<(usize, Region)> = (1..4).map(|pe| (pe, big(j.nic(pe), None))).collect();
    let mut chans: Vec<_> = (0..3)
        .map(|c| n0.bte_enable(c, 16 * u16::from(c), 16, 0, false).unwrap())
        .collect();
    for k in 0..3 {
        let (pe, ref d) = dsts[k];
        n0.bte_post(
            &mut chans[k],
            &txd(
                TxdMode1::PUT,
                &srcs[k],
                (pe as u32, d),
                1 << 20,
                TxdMode1::CQ_GLOBAL,
                k as u64,
            ),
        )
        .unwrap();
    }
    // Part way through, every channel has moved some data and none has finished: the
    // channels are served round-robin.
    j.c.deterministic()
        .unwrap()
        .run_for(emu_core::time::SimDuration::from_us(150));
    for (k, (pe, d)) in dsts.iter().enumerate() {
        let mut head = vec![0u8; 64 * 1024];
        j.nic(*pe).read_mem(d.addr, &mut head).unwrap();
        assert!(
            head[..] == pattern(k as u64, 64 * 1024)[..],
            "channel {k} started"
        );
        let mut tail = vec![0u8; 64 * 1024];
        j.nic(*pe)
            .read_mem(d.addr + (1 << 20) - 64 * 1024, &mut tail)
            .unwrap();
        assert!(tail.iter().all(|&b| b == 0), "channel {k} not done");
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
        assert_eq!(e.status(), Ok(HwStatus::Ok));
        seen.push(e.data() & 0xFF);
    }
    seen.sort_unstable();
    assert_eq!(seen, vec![0, 1, 2]);
    for (k, (pe, d)) in dsts.iter().enumerate() {
        let mut got = vec![0u8; 1 << 20];
        j.nic(*pe).read_mem(d.addr, &mut got).unwrap();
        assert!(got == pattern(k as u64, 1 << 20), "channel {k}");
    }
}

#[test]
fn fence_orders_descriptors() {
    let mut j = job(det([2, 1, 1], 13));
    let n0 = j.nic(0).clone();
    let src = big(&n0, None);
    let far = big(j.nic(3), None);
    let near = big(j.nic(1), None);
    let mut ch = n0.bte_enable(0, 0, 16, 0, false).unwrap();
    let small = 256;
    // Without FENCE the small transfer to a near node finishes before the big one.
    n0.bte_post(
        &mut ch,
        &txd(
            TxdMode1::PUT,
            &src,
            (3, &far),
            4 << 20,
            TxdMode1::CQ_GLOBAL,
            1,
        ),
    )
    .unwrap();
    n0.bte_post(
        &mut ch,
        &txd(
            TxdMode1::PUT,
            &src,
            (1, &near),
            small,
            TxdMode1::CQ_GLOBAL,
            2,
        ),
    )
    .unwrap();
    let order: Vec<u64> = (0..2)
        .map(|_| n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().data() & 0xF)
        .collect();
    assert_eq!(order, vec![2, 1]);
    // With FENCE on the second, it waits for the first.
    n0.bte_post(
        &mut ch,
        &txd(
            TxdMode1::PUT,
            &src,
            (3, &far),
            4 << 20,
            TxdMode1::CQ_GLOBAL,
            3,
        ),
    )
    .unwrap();
    let ev = TxdMode1::CQ_GLOBAL | TxdMode1::FENCE;
    n0.bte_post(&mut ch, &txd(TxdMode1::PUT, &src, (1, &near), small, ev, 4))
        .unwrap();
    let order: Vec<u64> = (0..2)
        .map(|_| n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().data() & 0xF)
        .collect();
    assert_eq!(order, vec![3, 4]);
}

#[test]
fn bad_descriptors_complete_with_errors() {
    let mut j = job(det([1, 1, 1], 14));
    let n0 = j.nic(0).clone();
    let src = big(&n0, None);
    let dst = big(j.nic(1), None);
    let mut ch = n0.bte_enable(1, 0, 8, 0, false).unwrap();
    // Each error comes with the data of the event the post asked for (the global event's,
    // `user_data` = tag | 0x1000), as a success would.
    // GET with a length that is not a multiple of 4.
    n0.bte_post(
        &mut ch,
        &txd(TxdMode1::GET, &src, (1, &dst), 4098, TxdMode1::CQ_GLOBAL, 1),
    )
    .unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::InvCmd), 0x1001));
    assert_eq!(n0.bte_err_rc(1).unwrap(), ReturnCode::AlignmentError.code());
    // Remote range past the registration.
    let mut t = txd(TxdMode1::PUT, &src, (1, &dst), 4096, TxdMode1::CQ_GLOBAL, 2);
    t.dest_mem_off = BIG - 100;
    n0.bte_post(&mut ch, &t).unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::MemBoundsErr), 0x1002));
    // Local source past its registration.
    let mut t = txd(TxdMode1::PUT, &src, (1, &dst), 4096, TxdMode1::CQ_GLOBAL, 3);
    t.src_mem_off = BIG - 10;
    n0.bte_post(&mut ch, &t).unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::MemBoundsErr), 0x1003));
    assert_eq!(n0.bte_err_rc(1).unwrap(), ReturnCode::InvalidParam.code());
    // Operation bits 0x6 name no operation.
    let mut t = txd(TxdMode1::PUT, &src, (1, &dst), 8, TxdMode1::CQ_GLOBAL, 4);
    t.mode1 |= 0x6;
    n0.bte_post(&mut ch, &t).unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::InvCmd), 0x1004));
    // A good one still goes through afterwards.
    n0.bte_post(
        &mut ch,
        &txd(TxdMode1::PUT, &src, (1, &dst), 64, TxdMode1::CQ_GLOBAL, 5),
    )
    .unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::Ok), 0x1005));
    assert_eq!(n0.bte_completed(1).unwrap(), 5);
}

#[test]
fn send_lands_in_the_receive_channel_with_immediate_data() {
    let mut j = job(det([1, 1, 1], 15));
    let (n0, n1) = (j.nic(0).clone(), j.nic(1).clone());
    let src = big(&n0, None);
    let msg = pattern(9, 300);
    n0.write_mem(src.addr, &msg).unwrap();
    let ch = emu_gemini::datagram::DATAGRAM_CHANNEL;
    let mut rx = n1.rx_enable(ch, 0, 4, 256).unwrap();
    let mut tx = n0.bte_enable(ch, 100, 8, 0, false).unwrap();
    let send = |len: u64, tag: u64| {
        let mut t = txd(
            TxdMode1::SEND,
            &src,
            (1, &src),
            len,
            TxdMode1::CQ_GLOBAL | TxdMode1::IMMED,
            tag,
        );
        t.user_data = 0xD47A_0000 + tag;
        t
    };
    // No buffer posted yet: the SEND fails, recoverably.
    n0.bte_post(&mut tx, &send(100, 1)).unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(e.status(), Ok(HwStatus::SequenceTerminate));
    assert!(e.status().unwrap().recoverable());
    let b0 = n1.alloc(4096).unwrap();
    let b1 = b0 + 1024;
    n1.rx_post(&mut rx, b0).unwrap();
    n1.rx_post(&mut rx, b1).unwrap();
    n0.bte_post(&mut tx, &send(100, 2)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::Ok)
    );
    let d = n1.wait(|| n1.rx_poll(&mut rx)).unwrap();
    assert_eq!(
        (d.buff_addr, d.data_len, d.imm_data),
        (b0, 100, 0xD47A_0002)
    );
    assert_eq!(d.err_status(), 0);
    let mut got = vec![0u8; 100];
    n1.read_mem(b0, &mut got).unwrap();
    assert_eq!(got, msg[..100]);
    // Longer than the buffer: cut to buf_size, error status in the flags.
    n0.bte_post(&mut tx, &send(300, 3)).unwrap();
    n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    let d = n1.wait(|| n1.rx_poll(&mut rx)).unwrap();
    assert_eq!((d.buff_addr, d.data_len), (b1, 256));
    assert_eq!(d.err_status(), u64::from(HwStatus::MemBoundsErr.code()));
}
