//! Shared setup for the emu-gemini integration tests.
#![allow(dead_code)]

use emu_gemini::cluster::{Cluster, ClusterConfig};
use emu_gemini::host::{Cq, Fma, Nic, Region};

/// Protection tag of the test job.
pub const PTAG: u8 = 10;
/// MDD of each node's data buffer.
pub const BUF_MDH: u16 = 1;
/// MDD of each node's result buffer (local landing zone).
pub const RES_MDH: u16 = 2;
/// Local event CQ.
pub const LOCAL_CQ: u16 = 1;
/// Remote event CQ.
pub const REMOTE_CQ: u16 = 2;
/// Bytes of the data buffer.
pub const BUF_LEN: u64 = 1 << 20;

/// One node of a test job.
pub struct Node {
    pub buf: Region,
    pub res: Region,
    pub local_cq: Cq,
    pub remote_cq: Cq,
    pub fma: Fma,
}

/// A cluster and one job set up on every node.
pub struct Job {
    pub c: Cluster,
    pub nodes: Vec<Node>,
}

impl Job {
    pub fn nic(&self, i: usize) -> &Nic {
        &self.c.nics[i]
    }
}

/// Set up every NIC of `c`: NTT identity, two CQs, a data buffer registered with the remote
/// CQ as its destination CQ, a result buffer, FMA descriptor 0.
pub fn job(c: Cluster) -> Job {
    job_with(c, 64)
}

pub fn job_with(c: Cluster, cq_entries: u64) -> Job {
    c.setup_ntt().unwrap();
    let nodes = c
        .nics
        .iter()
        .map(|nic| {
            let local_cq = nic.cq_create(LOCAL_CQ, cq_entries).unwrap();
            let remote_cq = nic.cq_create(REMOTE_CQ, cq_entries).unwrap();
            let a = nic.alloc(BUF_LEN).unwrap();
            let buf = nic
                .register(BUF_MDH, PTAG, a, BUF_LEN, true, Some(REMOTE_CQ))
                .unwrap();
            let r = nic.alloc(64 * 1024).unwrap();
            let res = nic
                .register(RES_MDH, PTAG, r, 64 * 1024, true, None)
                .unwrap();
            let fma = nic.fma_alloc(0, PTAG, LOCAL_CQ, None).unwrap();
            Node {
                buf,
                res,
                local_cq,
                remote_cq,
                fma,
            }
        })
        .collect();
    Job { c, nodes }
}

/// A deterministic cluster of `dims` routers (2 NICs each).
pub fn det(dims: [u32; 3], seed: u64) -> Cluster {
    Cluster::new(ClusterConfig::deterministic(dims, seed)).unwrap()
}
