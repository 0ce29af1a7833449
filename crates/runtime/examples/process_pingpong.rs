//! 8 B latency and 4 MiB bandwidth between two ranks that each host their own node (threads
//! playing processes, connected only through the fabric between processes), or between two
//! ranks of one in-process job for comparison.
//!
//! ```text
//! cargo run --release -p runtime --example process_pingpong -- [cassini|gemini] [shm|tcp|inprocess]
//! ```

use std::sync::Arc;
use std::time::Instant;

use mpi::{Source, Universe};
use runtime::process::{self, ProcessConfig};
use runtime::{InProcessPmi, Job, Nic, Shared};

const LAT_ITERS: u32 = 2000;
const BW_ITERS: u32 = 20;
const BIG: usize = 4 << 20;

/// Rank 0's figures: (8 B half round trip in µs, 4 MiB bandwidth in GB/s).
fn measure(u: &Universe) -> Option<(f64, f64)> {
    let w = u.world();
    let rank = w.rank();
    let peer = w.process_at_rank(1 - rank);
    let small = [7u8; 8];
    let mut buf = [0u8; 8];
    let pingpong = |iters: u32, buf: &mut [u8; 8]| {
        for _ in 0..iters {
            if rank == 0 {
                peer.send(&small[..]).unwrap();
                peer.receive_into(&mut buf[..]).unwrap();
            } else {
                peer.receive_into(&mut buf[..]).unwrap();
                peer.send(&small[..]).unwrap();
            }
        }
    };
    pingpong(200, &mut buf);
    let t = Instant::now();
    pingpong(LAT_ITERS, &mut buf);
    let lat = t.elapsed().as_secs_f64() * 1e6 / f64::from(LAT_ITERS) / 2.0;
    let big = vec![3u8; BIG];
    let mut rbuf = vec![0u8; BIG];
    let stream = |iters: u32, rbuf: &mut Vec<u8>| {
        for _ in 0..iters {
            if rank == 0 {
                peer.send(&big[..]).unwrap();
            } else {
                peer.receive_into(&mut rbuf[..]).unwrap();
            }
        }
        if rank == 0 {
            peer.receive_into(&mut [0u8; 8][..]).unwrap();
        } else {
            peer.send(&small[..]).unwrap();
        }
    };
    stream(2, &mut rbuf);
    let t = Instant::now();
    stream(BW_ITERS, &mut rbuf);
    let bw = (BIG as f64 * f64::from(BW_ITERS)) / t.elapsed().as_secs_f64() / 1e9;
    (rank == 0).then_some((lat, bw))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nic: Nic = args
        .first()
        .map_or("cassini", String::as_str)
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    let mode = args.get(1).map_or("shm", String::as_str);
    let out = match mode {
        "inprocess" => Job::new(nic, 2)
            .run(|u| measure(&u))
            .expect("job")
            .into_iter()
            .flatten()
            .next(),
        "shm" | "tcp" => {
            let mut cfg = ProcessConfig::new(nic);
            cfg.node.force_tcp = mode == "tcp";
            cfg.node.tcp_bind = "127.0.0.1".parse().unwrap();
            let shared = Shared::new();
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..2)
                    .map(|rank| {
                        let (shared, cfg) = (Arc::clone(&shared), &cfg);
                        s.spawn(move || {
                            let pmi = InProcessPmi::new(shared, rank, 2, (1, 0));
                            let (u, g) = process::init(Box::new(pmi), cfg).expect("init");
                            let r = measure(&u);
                            g.finish(u).expect("finalize");
                            r
                        })
                    })
                    .collect();
                hs.into_iter().filter_map(|h| h.join().unwrap()).next()
            })
        }
        m => panic!("unknown mode {m:?} (shm, tcp or inprocess)"),
    };
    let (lat, bw) = out.expect("rank 0 measured");
    println!(
        "{nic:?} {mode}: 8 B latency {lat:.2} us (half round trip), 4 MiB bandwidth {bw:.3} GB/s"
    );
}
