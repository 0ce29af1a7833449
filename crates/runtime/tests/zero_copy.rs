//! Zero copy, ranks as threads on nodes that reach the process's own memory (as a node
//! hosted in a rank process does): MPI messages at and above the zero-copy size go from the
//! sender's buffer to the receiver's with no staging copy on either side (the transports'
//! statistics say so), through the registration cache, on both NICs; the unexpected,
//! unaligned and truncated cases; a freed buffer is registered afresh; below the size, and
//! without process memory, nothing changes.

use mpi::{Error, Source, Universe};
use runtime::{Job, Nic};
use transport::Stats;

const MIB: usize = 1 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(131).wrapping_add(u32::from(seed)) as u8)
        .collect()
}

fn stats(u: &Universe) -> Stats {
    u.with_transport(|t| t.stats())
}

fn stat(s: &Stats, k: &str) -> u64 {
    s.get(k).copied().unwrap_or(0)
}

/// Rank 0 sends, rank 1 receives: two 1 MiB messages from one buffer (the second finds its
/// registration cached), an unexpected one (probed before the receive is posted), one at an
/// odd address and of odd length (Gemini's GET rule), and a small one (staged as before).
/// Returns each rank's statistics.
fn exchange(nic: Nic) -> Vec<Stats> {
    Job::new(nic, 2)
        .process_memory(true)
        .run(|u| {
            let w = u.world();
            assert_eq!(w.zero_copy_min(), Some(16 << 10), "zero copy from 16 KiB");
            let big = pattern(MIB, 1);
            let odd = pattern(100_003, 2);
            if w.rank() == 0 {
                let p = w.process_at_rank(1);
                p.send_with_tag(&big[..], 1).unwrap();
                p.send_with_tag(&big[..], 2).unwrap();
                p.send_with_tag(&big[..], 3).unwrap();
                p.send_with_tag(&odd[1..], 4).unwrap();
                p.send_with_tag(&big[..100], 5).unwrap();
            } else {
                let p = w.process_at_rank(0);
                let mut buf = vec![0u8; MIB];
                for tag in [1, 2] {
                    buf.fill(0);
                    let st = p.receive_into_with_tag(&mut buf[..], tag).unwrap();
                    assert_eq!(st.count::<u8>(), MIB);
                    assert!(buf == big, "message {tag} arrived whole");
                }
                // Unexpected: the whole message is announced before the receive exists.
                let st = p.probe_with_tag(3).unwrap();
                assert_eq!(st.count::<u8>(), MIB);
                buf.fill(0);
                p.receive_into_with_tag(&mut buf[..], 3).unwrap();
                assert!(buf == big, "the unexpected message arrived whole");
                let mut o = vec![0u8; 100_010];
                let st = p.receive_into_with_tag(&mut o[3..100_005], 4).unwrap();
                assert_eq!(st.count::<u8>(), 100_002);
                assert_eq!(&o[3..100_005], &odd[1..]);
                assert_eq!((o[2], o[100_005]), (0, 0), "nothing around it");
                let mut small = [0u8; 100];
                p.receive_into_with_tag(&mut small[..], 5).unwrap();
                assert_eq!(&small[..], &big[..100]);
            }
            w.barrier().unwrap();
            stats(&u)
        })
        .expect("job")
}

#[test]
fn cassini_moves_large_messages_between_the_ranks_own_buffers() {
    let s = exchange(Nic::Cassini);
    let (tx, rx) = (&s[0], &s[1]);
    assert_eq!(stat(tx, "send_zero_copy"), 4, "{tx:?}");
    assert_eq!(stat(tx, "send_staged"), 0, "no send was staged: {tx:?}");
    assert_eq!(stat(tx, "eager"), 0, "the small one went inline: {tx:?}");
    assert!(stat(tx, "mr_cache_hits") >= 2, "{tx:?}");
    assert_eq!(stat(rx, "recv_zero_copy"), 4, "{rx:?}");
    assert_eq!(
        stat(rx, "recv_landed"),
        1,
        "only the small one was copied into its buffer: {rx:?}"
    );
}

#[test]
fn gemini_moves_large_messages_between_the_ranks_own_buffers() {
    let s = exchange(Nic::Gemini);
    let (tx, rx) = (&s[0], &s[1]);
    assert_eq!(stat(tx, "send_zero_copy"), 4, "{tx:?}");
    assert_eq!(stat(tx, "R0"), 4, "{tx:?}");
    assert_eq!(stat(tx, "R1"), 0, "{tx:?}");
    assert!(stat(tx, "mr_cache_hits") >= 2, "{tx:?}");
    assert_eq!(stat(rx, "recv_zero_copy"), 4, "{rx:?}");
    assert_eq!(stat(rx, "PutFallback"), 1, "the odd one: {rx:?}");
    assert_eq!(
        stat(rx, "R0 landed") + stat(rx, "R0 copied"),
        0,
        "nothing copied out of a staging buffer: {rx:?}"
    );
}

/// A receive buffer shorter than the message: the first bytes land in place and the receive
/// reports the truncation, on both NICs.
#[test]
fn a_zero_copy_receive_reports_truncation() {
    for nic in [Nic::Cassini, Nic::Gemini] {
        Job::new(nic, 2)
            .process_memory(true)
            .run(|u| {
                let w = u.world();
                let data = pattern(64 << 10, 3);
                if w.rank() == 0 {
                    w.process_at_rank(1).send_with_tag(&data[..], 9).unwrap();
                } else {
                    let mut buf = vec![0u8; 32 << 10];
                    let r = w.process_at_rank(0).receive_into_with_tag(&mut buf[..], 9);
                    assert!(
                        matches!(r, Err(Error::Truncate { len, capacity }) if len == 64 << 10 && capacity == 32 << 10),
                        "{nic:?}: {r:?}"
                    );
                    assert_eq!(&buf[..], &data[..32 << 10], "{nic:?}");
                }
                w.barrier().unwrap();
            })
            .expect("job");
    }
}

/// A buffer unmapped after a message leaves a registration the memory monitor invalidated;
/// the next message, from a new mapping (often at the same address), registers again and
/// arrives whole.
#[test]
fn an_unmapped_buffer_is_registered_afresh() {
    for nic in [Nic::Cassini, Nic::Gemini] {
        let s = Job::new(nic, 2)
            .process_memory(true)
            .run(|u| {
                let w = u.world();
                for round in 0..3u8 {
                    let data = pattern(4 * MIB, round);
                    let mut m = memmap2::MmapMut::map_anon(4 * MIB).expect("mmap");
                    if w.rank() == 0 {
                        m.copy_from_slice(&data);
                        w.process_at_rank(1).send_with_tag(&m[..], 1).unwrap();
                    } else {
                        w.process_at_rank(0)
                            .receive_into_with_tag(&mut m[..], 1)
                            .unwrap();
                        assert!(m[..] == data[..], "{nic:?} round {round}");
                    }
                    // munmap: the registration of these pages is invalid from here on.
                    drop(m);
                    w.barrier().unwrap();
                }
                stats(&u)
            })
            .expect("job");
        for (rank, st) in s.iter().enumerate() {
            assert!(
                stat(st, "mr_cache_invalidated") >= 1,
                "{nic:?} rank {rank}: {st:?}"
            );
            assert!(
                stat(st, "mr_cache_misses") >= 2,
                "{nic:?} rank {rank}: {st:?}"
            );
        }
    }
}

/// Without process memory the transports stage as before and say so.
#[test]
fn without_process_memory_nothing_is_zero_copy() {
    let s = Job::new(Nic::Cassini, 2)
        .run(|u| {
            let w = u.world();
            assert_eq!(w.zero_copy_min(), None);
            let data = pattern(MIB, 4);
            if w.rank() == 0 {
                w.process_at_rank(1).send(&data[..]).unwrap();
            } else {
                let mut buf = vec![0u8; MIB];
                w.process_at_rank(0).receive_into(&mut buf[..]).unwrap();
                assert!(buf == data);
            }
            w.barrier().unwrap();
            stats(&u)
        })
        .expect("job");
    assert_eq!(stat(&s[0], "send_zero_copy"), 0);
    assert_eq!(stat(&s[0], "send_staged"), 1);
    assert_eq!(stat(&s[1], "recv_zero_copy"), 0);
}

/// A receive buffer unmapped while its zero-copy receive is posted (an erroneous program):
/// the NIC finds the registration's pin invalid, which is the hardware's error event —
/// the receive ends with an error — never a SIGSEGV, nor a write into the memory mapped
/// there since.
#[test]
fn a_receive_buffer_unmapped_under_a_posted_receive_is_an_error_not_a_crash() {
    for nic in [Nic::Cassini, Nic::Gemini] {
        Job::new(nic, 2)
            .process_memory(true)
            .run(|u| {
                let w = u.world();
                let data = pattern(MIB, 5);
                if w.rank() == 0 {
                    w.barrier().unwrap();
                    // The receiver's NIC refuses the bytes; what the sender hears of it
                    // (an error or a completed send) depends on the NIC's protocol.
                    let _ = w.process_at_rank(1).send_with_tag(&data[..], 1);
                } else {
                    let mut m = memmap2::MmapMut::map_anon(MIB).expect("mmap");
                    let addr = m.as_mut_ptr() as u64;
                    let r = w
                        .process_at_rank(0)
                        .immediate_receive_in_place(addr, MIB, Some(1))
                        .unwrap();
                    drop(m);
                    // New memory, quite possibly at the same address: it must stay as written.
                    let mut again = memmap2::MmapMut::map_anon(MIB).expect("mmap");
                    again.fill(0xa5);
                    // The error is the transport's from then on: the barrier may meet it first.
                    let res = w.barrier().and_then(|()| r.wait().map(|_| ()));
                    // Cassini's target event says C_RC_NO_TRANSLATION; Gemini's BTE GET into
                    // the buffer completes with a transaction error.
                    let hw = match nic {
                        Nic::Cassini => "NoTranslation",
                        Nic::Gemini => "a transaction failed",
                    };
                    assert!(
                        matches!(&res, Err(Error::Transport(m)) if m.contains(hw)),
                        "{nic:?}: {res:?}"
                    );
                    assert!(again.iter().all(|&b| b == 0xa5), "{nic:?}: a stray write");
                }
            })
            .expect("job");
    }
}

/// With the cache keeping nothing (`FI_MR_CACHE_MAX_COUNT=0`) every message registers its
/// buffers and the operation alone holds the registration until the NIC is done with it:
/// the messages still arrive whole, on both NICs, and nothing was found in the cache.
#[test]
fn without_a_cache_each_message_holds_its_own_registration() {
    for nic in [Nic::Cassini, Nic::Gemini] {
        let s = Job::new(nic, 2)
            .process_memory(true)
            .env("FI_MR_CACHE_MAX_COUNT", "0")
            .run(|u| {
                let w = u.world();
                for round in 0..3u8 {
                    let data = pattern(MIB, 30 + round);
                    if w.rank() == 0 {
                        w.process_at_rank(1).send_with_tag(&data[..], 1).unwrap();
                    } else {
                        let mut buf = vec![0u8; MIB];
                        w.process_at_rank(0)
                            .receive_into_with_tag(&mut buf[..], 1)
                            .unwrap();
                        assert!(buf == data, "{nic:?} round {round}");
                    }
                }
                w.barrier().unwrap();
                stats(&u)
            })
            .expect("job");
        assert_eq!(stat(&s[0], "send_zero_copy"), 3, "{nic:?}: {:?}", s[0]);
        assert_eq!(stat(&s[1], "recv_zero_copy"), 3, "{nic:?}: {:?}", s[1]);
        for (rank, st) in s.iter().enumerate() {
            assert_eq!(stat(st, "mr_cache_hits"), 0, "{nic:?} rank {rank}: {st:?}");
            assert!(
                stat(st, "mr_cache_misses") >= 3,
                "{nic:?} rank {rank}: {st:?}"
            );
        }
    }
}
