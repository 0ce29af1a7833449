//! Byte windows whose elements are described at each call (`Window<u8>` with a `Kind`, as
//! the C bindings use them): accumulate, get-accumulate, compare-and-swap and local reads
//! on two ranks, on both NICs.

use mpi::{AccumulateOp, Kind, SystemOperation};
use runtime::{Job, Nic};

fn kinds_on(nic: Nic) {
    let out = Job::new(nic, 2)
        .run(|u| {
            let world = u.world();
            let me = world.rank();
            let mut w = world.window_allocate::<u8>(32).expect("window");
            // Both ranks add (rank + 1) to the 64-bit element at byte 8 of rank 0.
            w.lock(mpi::LockType::Shared, 0).expect("lock");
            let v = (me as i64 + 1).to_le_bytes();
            w.accumulate_kind(Kind::I64, &v, 0, 8, AccumulateOp::Op(SystemOperation::Sum))
                .expect("accumulate");
            w.unlock(0).expect("unlock");
            world.barrier().expect("barrier");
            let mut got = vec![0u8; 8];
            let total = if me == 0 {
                w.local_read_bytes(8, &mut got).expect("local read");
                i64::from_le_bytes(got.clone().try_into().expect("8 bytes"))
            } else {
                -1
            };
            world.barrier().expect("barrier");
            // Rank 1 swaps 7 into rank 0's byte 16 if it is 0, twice: 0 then 7 come back.
            let mut cas = Vec::new();
            if me == 1 {
                w.lock(mpi::LockType::Exclusive, 0).expect("lock");
                for _ in 0..2 {
                    let old = w
                        .compare_and_swap_kind(
                            Kind::U64,
                            &7u64.to_le_bytes(),
                            &0u64.to_le_bytes(),
                            0,
                            16,
                        )
                        .expect("cas");
                    cas.push(u64::from_le_bytes(old.try_into().expect("8 bytes")));
                }
                // Replace two elements and read the old ones back.
                let two: Vec<u8> = [5i64, 6].iter().flat_map(|x| x.to_le_bytes()).collect();
                let old = w
                    .get_accumulate_kind(Kind::I64, &two, 0, 16, AccumulateOp::Replace)
                    .expect("get_accumulate");
                cas.push(u64::from_le_bytes(old[..8].try_into().expect("8 bytes")));
                let now = w
                    .get_accumulate_kind(Kind::I64, &[0; 16], 0, 16, AccumulateOp::NoOp)
                    .expect("no-op read");
                cas.push(u64::from_le_bytes(now[8..].try_into().expect("8 bytes")));
                // Out of the window, and a partial element: errors (PROD, which no NIC
                // atomic does, runs as a compare-and-swap loop: see below).
                assert!(
                    w.accumulate_kind(Kind::I64, &[0; 8], 0, 32, AccumulateOp::Replace)
                        .is_err()
                );
                assert!(
                    w.accumulate_kind(Kind::I64, &[0; 4], 0, 0, AccumulateOp::Replace)
                        .is_err()
                );
                w.unlock(0).expect("unlock");
            }
            world.barrier().expect("barrier");
            w.free().expect("free");
            (total, cas)
        })
        .expect("job");
    assert_eq!(out[0].0, 3, "{nic:?}: 1 + 2 accumulated");
    assert_eq!(
        out[1].1,
        vec![0, 7, 7, 6],
        "{nic:?}: cas, cas, replaced, read"
    );
}

#[test]
fn kind_windows_on_cassini() {
    kinds_on(Nic::Cassini);
}

#[test]
fn kind_windows_on_gemini() {
    kinds_on(Nic::Gemini);
}

/// Element types and operations the NIC's atomics lack (32-bit integers and MIN on Gemini,
/// PROD on both) run as compare-and-swap loops, still atomic: two ranks add 1 a hundred
/// times each to one 32-bit element, and multiply another.
fn cas_fallback_on(nic: Nic) {
    let out = Job::new(nic, 2)
        .run(|u| {
            let world = u.world();
            let mut w = world.window_allocate::<u8>(16).expect("window");
            if world.rank() == 0 {
                w.local_write(4, &3i32.to_le_bytes()).expect("local write");
                w.local_write(8, &2i16.to_le_bytes()).expect("local write");
            }
            world.barrier().expect("barrier");
            w.lock(mpi::LockType::Shared, 0).expect("lock");
            for _ in 0..100 {
                w.accumulate_kind(
                    Kind::I32,
                    &1i32.to_le_bytes(),
                    0,
                    0,
                    AccumulateOp::Op(SystemOperation::Sum),
                )
                .expect("i32 sum");
            }
            w.accumulate_kind(
                Kind::I32,
                &5i32.to_le_bytes(),
                0,
                4,
                AccumulateOp::Op(SystemOperation::Product),
            )
            .expect("i32 product");
            let old = w
                .get_accumulate_kind(
                    Kind::I16,
                    &(-7i16).to_le_bytes(),
                    0,
                    8,
                    AccumulateOp::Op(SystemOperation::Min),
                )
                .expect("i16 min");
            let cas = w
                .compare_and_swap_kind(Kind::U8, &[9], &[0], 0, 12)
                .expect("u8 cas");
            w.unlock(0).expect("unlock");
            world.barrier().expect("barrier");
            let mut mem = vec![0u8; 16];
            if world.rank() == 0 {
                w.local_read_bytes(0, &mut mem).expect("local read");
            }
            world.barrier().expect("barrier");
            w.free().expect("free");
            (mem, i16::from_le_bytes([old[0], old[1]]), cas[0])
        })
        .expect("job");
    let mem = &out[0].0;
    assert_eq!(
        i32::from_le_bytes(mem[0..4].try_into().unwrap()),
        200,
        "{nic:?}: sums"
    );
    assert_eq!(
        i32::from_le_bytes(mem[4..8].try_into().unwrap()),
        75,
        "{nic:?}: 3 * 5 * 5"
    );
    assert_eq!(
        i16::from_le_bytes(mem[8..10].try_into().unwrap()),
        -7,
        "{nic:?}: min"
    );
    assert_eq!(mem[12], 9, "{nic:?}: one swap took");
    let olds: Vec<i16> = out.iter().map(|o| o.1).collect();
    assert!(olds.contains(&2) && olds.contains(&-7), "{nic:?}: {olds:?}");
    let swaps: Vec<u8> = out.iter().map(|o| o.2).collect();
    assert!(
        swaps.contains(&0) && swaps.contains(&9),
        "{nic:?}: {swaps:?}"
    );
}

#[test]
fn cas_fallback_on_cassini() {
    cas_fallback_on(Nic::Cassini);
}

#[test]
fn cas_fallback_on_gemini() {
    cas_fallback_on(Nic::Gemini);
}
