//! What the ranks of a simulated job run, each checking what it received:
//!
//! - [`Workload::Semantics`]: the MPI semantics suite (`tests::mpi_semantics`): point to
//!   point order, wildcards, probes, cancel, synchronous sends, communicators, every
//!   collective (blocking and immediate) and RMA, checked against sequential references.
//! - [`Workload::Collectives`]: a mix of collectives whose kinds, roots and sizes are drawn
//!   from the seed, each result compared with its value computed from the inputs.
//! - [`Workload::Random`]: a random program ([`Program`]) of point-to-point phases and RMA
//!   epochs generated from the seed; every rank knows the whole program, so it knows the
//!   bytes of every message it must receive and the contents its window must hold after
//!   every epoch, computed by a sequential model of the program, not by MPI.
//!
//! Each rank returns a checksum of everything it received; a wrong value is an error
//! naming the operation, the peer and the first differing position.

use mpi::collective::Root;
use mpi::{SimpleCommunicator, Source, SystemOperation, Universe};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The program every rank runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// The MPI semantics suite.
    Semantics,
    /// A seeded mix of collectives.
    Collectives,
    /// A seeded random point-to-point and RMA program.
    Random,
}

impl Workload {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Semantics => "semantics",
            Workload::Collectives => "collectives",
            Workload::Random => "random",
        }
    }
}

impl std::str::FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "semantics" => Ok(Workload::Semantics),
            "collectives" => Ok(Workload::Collectives),
            "random" => Ok(Workload::Random),
            _ => Err(format!(
                "unknown workload {s:?} (expected semantics, collectives or random)"
            )),
        }
    }
}

/// Fold `w` into the checksum `h`.
pub(crate) fn fold(h: u64, w: u64) -> u64 {
    (h.rotate_left(7) ^ w).wrapping_mul(0x0100_0000_01b3)
}

fn fold_bytes(h: u64, b: &[u8]) -> u64 {
    b.chunks(8).fold(fold(h, b.len() as u64), |h, c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        fold(h, u64::from_le_bytes(w))
    })
}

/// Run `w` as one rank; a checksum of what it received, or what was wrong.
pub fn run_rank(w: Workload, seed: u64, u: Universe) -> Result<u64, String> {
    let world = u.world();
    match w {
        Workload::Semantics => {
            ::tests::mpi_semantics::run(&world);
            Ok(fold(0, world.rank() as u64))
        }
        Workload::Collectives => collectives(&world, seed),
        Workload::Random => {
            let prog = Program::generate(seed, world.size() as u32);
            prog.run(&world)
        }
    }
}

/// The element `i` of rank `r`'s contribution in collective round `k`.
fn val(k: usize, r: i32, i: usize) -> i64 {
    ((k as i64) << 40) ^ (i64::from(r) << 20) ^ i as i64
}

fn collectives(c: &SimpleCommunicator, seed: u64) -> Result<u64, String> {
    let (r, p) = (c.rank(), c.size());
    let pu = p as usize;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xC011_EC71);
    let rounds = rng.random_range(6..12usize);
    let mut h = 0u64;
    let err = |k: usize, what: &str, e: mpi::Error| format!("round {k}: {what}: {e}");
    for k in 0..rounds {
        let n = match rng.random_range(0..4) {
            0 => rng.random_range(1..8usize),
            1 => rng.random_range(8..512),
            2 => rng.random_range(512..4096),
            _ => rng.random_range(4096..40_000),
        };
        match rng.random_range(0..6) {
            0 => {
                let mine: Vec<i64> = (0..n).map(|i| val(k, r, i)).collect();
                let mut out = vec![0i64; n];
                c.all_reduce_into(&mine[..], &mut out[..], SystemOperation::sum())
                    .map_err(|e| err(k, "allreduce", e))?;
                for (i, &x) in out.iter().enumerate() {
                    let want: i64 = (0..p).map(|q| val(k, q, i)).sum();
                    if x != want {
                        return Err(format!(
                            "round {k}: allreduce of {n}: element {i} is {x}, expected {want}"
                        ));
                    }
                }
                h = out.iter().fold(h, |h, &x| fold(h, x as u64));
            }
            1 => {
                let root = rng.random_range(0..p);
                let mut b: Vec<i64> = (0..n)
                    .map(|i| if r == root { val(k, root, i) } else { 0 })
                    .collect();
                c.process_at_rank(root)
                    .broadcast_into(&mut b[..])
                    .map_err(|e| err(k, "bcast", e))?;
                if let Some(i) = (0..n).find(|&i| b[i] != val(k, root, i)) {
                    return Err(format!(
                        "round {k}: bcast of {n} from {root}: element {i} is {}",
                        b[i]
                    ));
                }
                h = b.iter().fold(h, |h, &x| fold(h, x as u64));
            }
            2 => {
                let per = n.div_ceil(pu).max(1);
                let send: Vec<i64> = (0..per * pu).map(|i| val(k, r, i)).collect();
                let mut recv = vec![0i64; per * pu];
                c.all_to_all_into(&send[..], &mut recv[..])
                    .map_err(|e| err(k, "alltoall", e))?;
                for q in 0..pu {
                    for j in 0..per {
                        let want = val(k, q as i32, r as usize * per + j);
                        if recv[q * per + j] != want {
                            return Err(format!(
                                "round {k}: alltoall block from {q}: element {j} is {}, expected {want}",
                                recv[q * per + j]
                            ));
                        }
                    }
                }
                h = recv.iter().fold(h, |h, &x| fold(h, x as u64));
            }
            3 => {
                let per = n.div_ceil(pu).max(1);
                let mine: Vec<i64> = (0..per).map(|i| val(k, r, i)).collect();
                let mut all = vec![0i64; per * pu];
                c.all_gather_into(&mine[..], &mut all[..])
                    .map_err(|e| err(k, "allgather", e))?;
                for q in 0..pu {
                    for j in 0..per {
                        if all[q * per + j] != val(k, q as i32, j) {
                            return Err(format!(
                                "round {k}: allgather block {q}: element {j} is {}",
                                all[q * per + j]
                            ));
                        }
                    }
                }
                h = all.iter().fold(h, |h, &x| fold(h, x as u64));
            }
            4 => {
                let per = (n / pu).clamp(1, 2048);
                let send: Vec<i64> = (0..per * pu).map(|i| val(k, r, i)).collect();
                let mut out = vec![0i64; per];
                c.reduce_scatter_block_into(&send[..], &mut out[..], SystemOperation::sum())
                    .map_err(|e| err(k, "reduce_scatter", e))?;
                for (j, &x) in out.iter().enumerate() {
                    let want: i64 = (0..p).map(|q| val(k, q, r as usize * per + j)).sum();
                    if x != want {
                        return Err(format!(
                            "round {k}: reduce_scatter element {j} is {x}, expected {want}"
                        ));
                    }
                }
                h = out.iter().fold(h, |h, &x| fold(h, x as u64));
            }
            _ => {
                let m = n.min(256);
                let mine: Vec<i64> = (0..m).map(|i| val(k, r, i)).collect();
                let mut out = vec![0i64; m];
                c.scan_into(&mine[..], &mut out[..], SystemOperation::sum())
                    .map_err(|e| err(k, "scan", e))?;
                for (i, &x) in out.iter().enumerate() {
                    let want: i64 = (0..=r).map(|q| val(k, q, i)).sum();
                    if x != want {
                        return Err(format!(
                            "round {k}: scan element {i} is {x}, expected {want}"
                        ));
                    }
                }
                h = out.iter().fold(h, |h, &x| fold(h, x as u64));
            }
        }
    }
    c.barrier().map_err(|e| format!("final barrier: {e}"))?;
    Ok(h)
}

/// One message of a point-to-point phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    /// Sender.
    pub src: u32,
    /// Receiver.
    pub dst: u32,
    /// Tag.
    pub tag: i32,
    /// Bytes.
    pub len: usize,
    /// Synchronous send.
    pub sync: bool,
}

/// One RMA operation of an epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RmaOp {
    /// `origin` puts `value` into `slot` of `target`'s window.
    Put {
        /// Who.
        origin: u32,
        /// Where.
        target: u32,
        /// Which element.
        slot: usize,
        /// What.
        value: i64,
    },
    /// `origin` adds `value` to `slot` of `target`'s window.
    Add {
        /// Who.
        origin: u32,
        /// Where.
        target: u32,
        /// Which element.
        slot: usize,
        /// What.
        value: i64,
    },
}

/// A phase of a random program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Messages, all in flight at once (immediate sends and receives, then wait all).
    P2p(Vec<Msg>),
    /// A fence epoch of puts and accumulates, then every rank reads one remote slot.
    Rma(Vec<RmaOp>),
}

/// Elements of each rank's window in a random program.
pub const WINDOW: usize = 32;

/// A random program, the same on every rank (generated from the seed alone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    seed: u64,
    ranks: u32,
    /// The phases, in order.
    pub phases: Vec<Phase>,
}

/// Byte `i` of message `m` of phase `ph` of the program with `seed`.
pub fn payload_byte(seed: u64, ph: usize, m: usize, i: usize) -> u8 {
    let x = seed
        ^ (ph as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (m as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ (i as u64 / 8).wrapping_mul(0x1656_67B1_9E37_79F9);
    let x = (x ^ (x >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> (8 * (i % 8))) as u8
}

impl Program {
    /// The program of `seed` for `ranks` ranks.
    pub fn generate(seed: u64, ranks: u32) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x005E_ED0F_9A0D);
        let n_phases = rng.random_range(3..7usize);
        let mut phases = Vec::with_capacity(n_phases);
        for _ in 0..n_phases {
            if ranks > 1 && rng.random_bool(0.4) {
                let ops = rng.random_range(1..=3 * ranks as usize);
                let mut put_slots = std::collections::BTreeSet::new();
                let mut v = Vec::with_capacity(ops);
                for _ in 0..ops {
                    let origin = rng.random_range(0..ranks);
                    let target = rng.random_range(0..ranks);
                    let slot = rng.random_range(0..WINDOW);
                    let value = rng.random_range(-1_000_000..1_000_000i64);
                    // One put per (target, slot) per epoch and no add beside it, so the
                    // outcome does not depend on the order the epoch's operations land.
                    if rng.random_bool(0.5)
                        && !v.iter().any(|o: &RmaOp| match o {
                            RmaOp::Add {
                                target: t, slot: s, ..
                            } => *t == target && *s == slot,
                            RmaOp::Put { .. } => false,
                        })
                        && put_slots.insert((target, slot))
                    {
                        v.push(RmaOp::Put {
                            origin,
                            target,
                            slot,
                            value,
                        });
                    } else if !put_slots.contains(&(target, slot)) {
                        v.push(RmaOp::Add {
                            origin,
                            target,
                            slot,
                            value,
                        });
                    }
                }
                phases.push(Phase::Rma(v));
            } else {
                let n = rng.random_range(1..=4 * ranks.max(1) as usize);
                let mut msgs = Vec::with_capacity(n);
                for _ in 0..n {
                    let src = rng.random_range(0..ranks);
                    let dst = rng.random_range(0..ranks);
                    let len = match rng.random_range(0..10) {
                        0 => 0,
                        1..=4 => rng.random_range(1..256usize),
                        5..=7 => rng.random_range(256..16_384),
                        _ => rng.random_range(16_384..200_000),
                    };
                    msgs.push(Msg {
                        src,
                        dst,
                        tag: rng.random_range(0..4),
                        len,
                        sync: rng.random_bool(0.2),
                    });
                }
                phases.push(Phase::P2p(msgs));
            }
        }
        Program {
            seed,
            ranks,
            phases,
        }
    }

    /// The windows of every rank after each RMA phase, by phase index (a sequential model
    /// of the program).
    pub fn expected_windows(&self) -> Vec<Option<Vec<Vec<i64>>>> {
        let mut w = vec![vec![0i64; WINDOW]; self.ranks as usize];
        self.phases
            .iter()
            .map(|ph| match ph {
                Phase::P2p(_) => None,
                Phase::Rma(ops) => {
                    for op in ops {
                        match *op {
                            RmaOp::Put {
                                target,
                                slot,
                                value,
                                ..
                            } => {
                                w[target as usize][slot] = value;
                            }
                            RmaOp::Add {
                                target,
                                slot,
                                value,
                                ..
                            } => {
                                let x = &mut w[target as usize][slot];
                                *x = x.wrapping_add(value);
                            }
                        }
                    }
                    Some(w.clone())
                }
            })
            .collect()
    }

    /// Run the program as one rank of `c`.
    pub fn run(&self, c: &SimpleCommunicator) -> Result<u64, String> {
        let me = c.rank() as u32;
        let expected = self.expected_windows();
        let mut win = c
            .window_allocate::<i64>(WINDOW)
            .map_err(|e| format!("window: {e}"))?;
        let mut h = 0u64;
        for (pi, ph) in self.phases.iter().enumerate() {
            match ph {
                Phase::P2p(msgs) => {
                    h = self.p2p(c, pi, msgs, h)?;
                }
                Phase::Rma(ops) => {
                    win.fence().map_err(|e| format!("phase {pi}: fence: {e}"))?;
                    for op in ops {
                        match *op {
                            RmaOp::Put {
                                origin,
                                target,
                                slot,
                                value,
                            } if origin == me => {
                                win.put(&[value], target as i32, slot)
                                    .map_err(|e| format!("phase {pi}: put: {e}"))?;
                            }
                            RmaOp::Add {
                                origin,
                                target,
                                slot,
                                value,
                            } if origin == me => {
                                win.accumulate(
                                    &[value],
                                    target as i32,
                                    slot,
                                    SystemOperation::sum(),
                                )
                                .map_err(|e| format!("phase {pi}: accumulate: {e}"))?;
                            }
                            _ => {}
                        }
                    }
                    win.fence().map_err(|e| format!("phase {pi}: fence: {e}"))?;
                    let want = expected[pi].as_ref().ok_or("no model of an RMA phase")?;
                    let local = win.local().map_err(|e| format!("phase {pi}: local: {e}"))?;
                    if let Some(i) = (0..WINDOW).find(|&i| local[i] != want[me as usize][i]) {
                        return Err(format!(
                            "phase {pi}: rank {me}'s window element {i} is {}, expected {}",
                            local[i], want[me as usize][i]
                        ));
                    }
                    // Read the right neighbour's window and check it against the model.
                    let right = (me + 1) % self.ranks;
                    let got = win
                        .get(right as i32, 0, WINDOW)
                        .map_err(|e| format!("phase {pi}: get: {e}"))?;
                    win.fence().map_err(|e| format!("phase {pi}: fence: {e}"))?;
                    if let Some(i) = (0..WINDOW).find(|&i| got[i] != want[right as usize][i]) {
                        return Err(format!(
                            "phase {pi}: get of rank {right}'s element {i} gave {}, expected {}",
                            got[i], want[right as usize][i]
                        ));
                    }
                    h = local.iter().chain(&got).fold(h, |h, &x| fold(h, x as u64));
                }
            }
        }
        win.free().map_err(|e| format!("window free: {e}"))?;
        c.barrier().map_err(|e| format!("final barrier: {e}"))?;
        Ok(h)
    }

    fn p2p(&self, c: &SimpleCommunicator, pi: usize, msgs: &[Msg], h: u64) -> Result<u64, String> {
        let me = c.rank() as u32;
        let incoming: Vec<(usize, &Msg)> = msgs
            .iter()
            .enumerate()
            .filter(|(_, m)| m.dst == me)
            .collect();
        let mut bufs: Vec<Vec<u8>> = incoming.iter().map(|(_, m)| vec![0xEE; m.len]).collect();
        mpi::scope(|s| -> Result<(), String> {
            let mut reqs = Vec::new();
            for ((_, m), buf) in incoming.iter().zip(bufs.iter_mut()) {
                reqs.push(
                    c.process_at_rank(m.src as i32)
                        .immediate_receive_into_with_tag(s, &mut buf[..], m.tag)
                        .map_err(|e| format!("phase {pi}: irecv: {e}"))?,
                );
            }
            for (mi, m) in msgs.iter().enumerate().filter(|(_, m)| m.src == me) {
                let data: Vec<u8> = (0..m.len)
                    .map(|i| payload_byte(self.seed, pi, mi, i))
                    .collect();
                let to = c.process_at_rank(m.dst as i32);
                let req = if m.sync {
                    to.immediate_synchronous_send_with_tag(&data[..], m.tag)
                } else {
                    to.immediate_send_with_tag(&data[..], m.tag)
                };
                reqs.push(req.map_err(|e| format!("phase {pi}: isend: {e}"))?);
            }
            mpi::request::wait_all(reqs).map_err(|e| format!("phase {pi}: wait: {e}"))?;
            Ok(())
        })?;
        let mut h = h;
        for ((mi, m), buf) in incoming.iter().zip(&bufs) {
            if let Some(i) = (0..m.len).find(|&i| buf[i] != payload_byte(self.seed, pi, *mi, i)) {
                return Err(format!(
                    "phase {pi}: message {mi} ({} -> {}, tag {}, {} B): byte {i} is {:#04x}, expected {:#04x}",
                    m.src,
                    m.dst,
                    m.tag,
                    m.len,
                    buf[i],
                    payload_byte(self.seed, pi, *mi, i)
                ));
            }
            h = fold_bytes(fold(h, *mi as u64), buf);
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_a_function_of_the_seed() {
        assert_eq!(Program::generate(5, 4), Program::generate(5, 4));
        assert_ne!(Program::generate(5, 4), Program::generate(6, 4));
        let p = Program::generate(9, 3);
        assert!(!p.phases.is_empty());
        for ph in &p.phases {
            match ph {
                Phase::P2p(m) => assert!(m.iter().all(|m| m.src < 3 && m.dst < 3)),
                Phase::Rma(o) => assert!(o.iter().all(|o| match o {
                    RmaOp::Put { target, slot, .. } | RmaOp::Add { target, slot, .. } =>
                        *target < 3 && *slot < WINDOW,
                })),
            }
        }
    }

    #[test]
    fn the_window_model_applies_puts_and_adds() {
        let p = Program {
            seed: 1,
            ranks: 2,
            phases: vec![
                Phase::Rma(vec![
                    RmaOp::Put {
                        origin: 0,
                        target: 1,
                        slot: 3,
                        value: 7,
                    },
                    RmaOp::Add {
                        origin: 1,
                        target: 1,
                        slot: 4,
                        value: 5,
                    },
                    RmaOp::Add {
                        origin: 0,
                        target: 1,
                        slot: 4,
                        value: -2,
                    },
                ]),
                Phase::P2p(vec![]),
                Phase::Rma(vec![RmaOp::Add {
                    origin: 1,
                    target: 1,
                    slot: 3,
                    value: 1,
                }]),
            ],
        };
        let w = p.expected_windows();
        let a = w[0].as_ref().unwrap();
        assert_eq!((a[1][3], a[1][4], a[0][3]), (7, 3, 0));
        assert!(w[1].is_none());
        assert_eq!(w[2].as_ref().unwrap()[1][3], 8);
    }

    #[test]
    fn payloads_differ_between_messages() {
        let a: Vec<u8> = (0..64).map(|i| payload_byte(1, 0, 0, i)).collect();
        let b: Vec<u8> = (0..64).map(|i| payload_byte(1, 0, 1, i)).collect();
        assert_ne!(a, b);
        assert!(a.iter().any(|&x| x != a[0]));
    }
}
