//! The collective algorithms, on bytes. Every function is called by every rank of `comm` with
//! the same sizes (checked by the typed layer above where it can be).

use crate::communicator::SimpleCommunicator;
use crate::datatype::Kind;
use crate::op::{SystemOperation, apply};
use transport::error::Result;

/// Allreduce switches from recursive doubling to the ring at this many bytes.
pub(crate) const ALLREDUCE_RING_MIN: usize = 64 << 10;
/// Bcast switches to scatter + allgather at this many bytes (with at least 8 ranks).
pub(crate) const BCAST_LONG_MIN: usize = 512 << 10;
/// Allgather uses Bruck below this total size, the ring above.
pub(crate) const ALLGATHER_RING_MIN: usize = 80 << 10;
/// Alltoall uses Bruck for blocks up to this size (with at least 8 ranks).
pub(crate) const ALLTOALL_BRUCK_MAX: usize = 256;

fn rel(r: i32, root: i32, p: i32) -> i32 {
    (r - root + p) % p
}

fn abs(vr: i32, root: i32, p: i32) -> i32 {
    (vr + root) % p
}

/// Chunk `i` of `n` bytes cut into `p` chunks of whole elements of `elem` bytes:
/// (offset, length).
pub(crate) fn chunk(n: usize, elem: usize, p: usize, i: usize) -> (usize, usize) {
    let count = n / elem;
    let base = count / p;
    let extra = count % p;
    let start = i * base + i.min(extra);
    let len = base + usize::from(i < extra);
    (start * elem, len * elem)
}

impl SimpleCommunicator {
    // The size-based choices (MPICH's, see the module table), shared by the blocking and the
    // immediate calls.

    /// Bcast of `buf` from `root`: binomial, or scatter + ring allgather for long messages on
    /// at least 8 ranks (Thakur, Rabenseifner & Gropp 2005, §4.1).
    pub(crate) async fn bcast(&self, buf: &mut [u8], root: i32, t: u32) -> Result<()> {
        if buf.len() >= BCAST_LONG_MIN && self.size() >= 8 {
            self.bcast_scatter_allgather(buf, root, t).await
        } else {
            self.bcast_binomial(buf, root, t).await
        }
    }

    /// Allreduce in place: recursive doubling, or the ring (Rabenseifner's reduce-scatter +
    /// allgather, done as rings) for long vectors with at least one element per rank.
    pub(crate) async fn allreduce(
        &self,
        acc: &mut [u8],
        kind: Kind,
        op: SystemOperation,
        t: u32,
    ) -> Result<()> {
        if acc.len() >= ALLREDUCE_RING_MIN && acc.len() / kind.size() >= self.size() as usize {
            self.allreduce_ring(acc, kind, op, t).await
        } else {
            self.allreduce_recursive_doubling(acc, kind, op, t).await
        }
    }

    /// Allgather of equal blocks: Bruck below 80 KiB in total, the ring above.
    pub(crate) async fn allgather(&self, mine: &[u8], out: &mut [u8], t: u32) -> Result<()> {
        if out.len() < ALLGATHER_RING_MIN {
            self.allgather_bruck(mine, out, t).await
        } else {
            let b = mine.len();
            let r = self.rank() as usize;
            out[r * b..(r + 1) * b].copy_from_slice(mine);
            self.allgather_ring(out, &|i| (i * b, b), t).await
        }
    }

    /// Alltoall of blocks of `b` bytes: Bruck for short blocks on at least 8 ranks, pairwise
    /// exchange otherwise.
    pub(crate) async fn alltoall(
        &self,
        send: &[u8],
        recv: &mut [u8],
        b: usize,
        t: u32,
    ) -> Result<()> {
        if b <= ALLTOALL_BRUCK_MAX && self.size() >= 8 {
            self.alltoall_bruck(send, recv, b, t).await
        } else {
            self.alltoall_pairwise(send, &|i| (i * b, b), recv, &|i| (i * b, b), t)
                .await
        }
    }

    /// Dissemination barrier: ⌈log2 p⌉ rounds of zero-byte messages.
    pub(crate) async fn barrier_dissemination(&self, t: u32) -> Result<()> {
        let (r, p) = (self.rank(), self.size());
        let mut k = 1;
        while k < p {
            self.coll_sendrecv((r + k) % p, &[], (r - k + p) % p, t, &mut [])
                .await?;
            k <<= 1;
        }
        Ok(())
    }

    /// Binomial-tree broadcast of `buf` from `root`.
    pub(crate) async fn bcast_binomial(&self, buf: &mut [u8], root: i32, t: u32) -> Result<()> {
        let (r, p) = (self.rank(), self.size());
        let vr = rel(r, root, p);
        let mut mask = 1;
        while mask < p {
            if vr & mask != 0 {
                self.coll_recv(abs(vr - mask, root, p), t, buf).await?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if vr + mask < p {
                self.coll_send(abs(vr + mask, root, p), t, buf).await?;
            }
            mask >>= 1;
        }
        Ok(())
    }

    /// Long-message broadcast: binomial scatter of `p` chunks, then a ring allgather.
    pub(crate) async fn bcast_scatter_allgather(
        &self,
        buf: &mut [u8],
        root: i32,
        t: u32,
    ) -> Result<()> {
        let p = self.size() as usize;
        let n = buf.len();
        // Scatter: rank vr ends up with chunk vr, using the binomial scatter on chunk ranges.
        let vr = rel(self.rank(), root, p as i32) as usize;
        let span = |from: usize, count: usize| -> (usize, usize) {
            let (s, _) = chunk(n, 1, p, from);
            let end = if from + count >= p {
                n
            } else {
                chunk(n, 1, p, from + count).0
            };
            (s, end - s)
        };
        let mut mask = 1usize;
        while mask < p {
            if vr & mask != 0 {
                let count = mask.min(p - vr);
                let (s, l) = span(vr, count);
                let src = abs((vr - mask) as i32, root, p as i32);
                self.coll_recv(src, t, &mut buf[s..s + l]).await?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if vr + mask < p {
                let count = mask.min(p - vr - mask);
                let (s, l) = span(vr + mask, count);
                let dst = abs((vr + mask) as i32, root, p as i32);
                self.coll_send(dst, t, &buf[s..s + l]).await?;
            }
            mask >>= 1;
        }
        // Ring allgather of the chunks, in relative numbering.
        let right = abs(((vr + 1) % p) as i32, root, p as i32);
        let left = abs(((vr + p - 1) % p) as i32, root, p as i32);
        for step in 0..p - 1 {
            let send_i = (vr + p - step) % p;
            let recv_i = (vr + p - step - 1) % p;
            let (ss, sl) = chunk(n, 1, p, send_i);
            let (rs, rl) = chunk(n, 1, p, recv_i);
            let out = buf[ss..ss + sl].to_vec();
            self.coll_sendrecv(right, &out, left, t, &mut buf[rs..rs + rl])
                .await?;
        }
        Ok(())
    }

    /// Binomial-tree reduction of `acc` (this rank's contribution, reduced in place) to
    /// `root`; on the root `acc` ends as the result.
    pub(crate) async fn reduce_binomial(
        &self,
        acc: &mut [u8],
        kind: Kind,
        op: SystemOperation,
        root: i32,
        t: u32,
    ) -> Result<()> {
        let (r, p) = (self.rank(), self.size());
        let vr = rel(r, root, p);
        let mut tmp = vec![0u8; acc.len()];
        let mut mask = 1;
        while mask < p {
            if vr & mask == 0 {
                let src = vr | mask;
                if src < p {
                    self.coll_recv(abs(src, root, p), t, &mut tmp).await?;
                    apply(op, kind, acc, &tmp)?;
                }
            } else {
                self.coll_send(abs(vr & !mask, root, p), t, acc).await?;
                break;
            }
            mask <<= 1;
        }
        Ok(())
    }

    /// Recursive-doubling allreduce, in place; the ranks beyond the largest power of two
    /// first fold into a partner and get the result back at the end.
    pub(crate) async fn allreduce_recursive_doubling(
        &self,
        acc: &mut [u8],
        kind: Kind,
        op: SystemOperation,
        t: u32,
    ) -> Result<()> {
        let (r, p) = (self.rank(), self.size());
        let pof2 = 1 << (31 - (p as u32).leading_zeros());
        let rem = p - pof2;
        let mut tmp = vec![0u8; acc.len()];
        let newrank = if r < 2 * rem {
            if r % 2 == 0 {
                self.coll_send(r + 1, t, acc).await?;
                -1
            } else {
                self.coll_recv(r - 1, t, &mut tmp).await?;
                apply(op, kind, acc, &tmp)?;
                r / 2
            }
        } else {
            r - rem
        };
        if newrank >= 0 {
            let mut mask = 1;
            while mask < pof2 {
                let np = newrank ^ mask;
                let partner = if np < rem { np * 2 + 1 } else { np + rem };
                let out = acc.to_vec();
                self.coll_sendrecv(partner, &out, partner, t, &mut tmp)
                    .await?;
                // Combine in rank order so every rank computes the same bits.
                if partner < r {
                    apply(op, kind, &mut tmp, &out)?;
                    acc.copy_from_slice(&tmp);
                } else {
                    apply(op, kind, acc, &tmp)?;
                }
                mask <<= 1;
            }
        }
        if r < 2 * rem {
            if r % 2 == 1 {
                self.coll_send(r - 1, t, acc).await?;
            } else {
                self.coll_recv(r + 1, t, acc).await?;
            }
        }
        Ok(())
    }

    /// Ring reduce-scatter in place over chunks given by `bounds(i) = (offset, len)`: after it,
    /// this rank's chunk (index `rank`) of `acc` holds the reduction of everyone's.
    pub(crate) async fn reduce_scatter_ring(
        &self,
        acc: &mut [u8],
        kind: Kind,
        op: SystemOperation,
        bounds: &dyn Fn(usize) -> (usize, usize),
        t: u32,
    ) -> Result<()> {
        let (r, p) = (self.rank() as usize, self.size() as usize);
        let right = ((r + 1) % p) as i32;
        let left = ((r + p - 1) % p) as i32;
        for s in 0..p.saturating_sub(1) {
            let send_i = (r + 2 * p - s - 1) % p;
            let recv_i = (r + 2 * p - s - 2) % p;
            let (ss, sl) = bounds(send_i);
            let (rs, rl) = bounds(recv_i);
            let out = acc[ss..ss + sl].to_vec();
            let mut tmp = vec![0u8; rl];
            self.coll_sendrecv(right, &out, left, t, &mut tmp).await?;
            apply(op, kind, &mut acc[rs..rs + rl], &tmp)?;
        }
        Ok(())
    }

    /// Ring allgather in place: chunk `i` (by `bounds`) comes from rank `i`.
    pub(crate) async fn allgather_ring(
        &self,
        buf: &mut [u8],
        bounds: &dyn Fn(usize) -> (usize, usize),
        t: u32,
    ) -> Result<()> {
        let (r, p) = (self.rank() as usize, self.size() as usize);
        let right = ((r + 1) % p) as i32;
        let left = ((r + p - 1) % p) as i32;
        for s in 0..p.saturating_sub(1) {
            let send_i = (r + p - s) % p;
            let recv_i = (r + p - s - 1) % p;
            let (ss, sl) = bounds(send_i);
            let (rs, rl) = bounds(recv_i);
            let out = buf[ss..ss + sl].to_vec();
            self.coll_sendrecv(right, &out, left, t, &mut buf[rs..rs + rl])
                .await?;
        }
        Ok(())
    }

    /// Ring allreduce: reduce-scatter then allgather, each chunk a `p`-th of the elements.
    pub(crate) async fn allreduce_ring(
        &self,
        acc: &mut [u8],
        kind: Kind,
        op: SystemOperation,
        t: u32,
    ) -> Result<()> {
        let p = self.size() as usize;
        let (n, elem) = (acc.len(), kind.size());
        let bounds = move |i: usize| chunk(n, elem, p, i);
        self.reduce_scatter_ring(acc, kind, op, &bounds, t).await?;
        self.allgather_ring(acc, &bounds, t).await
    }

    /// Bruck allgather: `block` bytes from every rank into `out` (rank order).
    pub(crate) async fn allgather_bruck(&self, mine: &[u8], out: &mut [u8], t: u32) -> Result<()> {
        let (r, p) = (self.rank() as usize, self.size() as usize);
        let b = mine.len();
        let mut tmp = Vec::with_capacity(b * p);
        tmp.extend_from_slice(mine);
        let mut k = 1;
        while k < p {
            let count = k.min(p - k);
            let dst = ((r + p - k) % p) as i32;
            let src = ((r + k) % p) as i32;
            let out_blocks = tmp[..count * b].to_vec();
            let mut inb = vec![0u8; count * b];
            self.coll_sendrecv(dst, &out_blocks, src, t, &mut inb)
                .await?;
            tmp.extend_from_slice(&inb);
            k <<= 1;
        }
        for i in 0..p {
            let owner = (r + i) % p;
            out[owner * b..(owner + 1) * b].copy_from_slice(&tmp[i * b..(i + 1) * b]);
        }
        Ok(())
    }

    /// Bruck alltoall: `send` holds `p` blocks of `b` bytes, block `i` for rank `i`.
    pub(crate) async fn alltoall_bruck(
        &self,
        send: &[u8],
        recv: &mut [u8],
        b: usize,
        t: u32,
    ) -> Result<()> {
        let (r, p) = (self.rank() as usize, self.size() as usize);
        // Rotate: position i holds the block for rank r + i.
        let mut tmp = vec![0u8; p * b];
        for i in 0..p {
            let src = (r + i) % p;
            tmp[i * b..(i + 1) * b].copy_from_slice(&send[src * b..(src + 1) * b]);
        }
        let mut k = 1;
        while k < p {
            let idx: Vec<usize> = (0..p).filter(|i| i & k != 0).collect();
            let mut out = Vec::with_capacity(idx.len() * b);
            for &i in &idx {
                out.extend_from_slice(&tmp[i * b..(i + 1) * b]);
            }
            let mut inb = vec![0u8; idx.len() * b];
            let dst = ((r + k) % p) as i32;
            let src = ((r + p - k) % p) as i32;
            self.coll_sendrecv(dst, &out, src, t, &mut inb).await?;
            for (j, &i) in idx.iter().enumerate() {
                tmp[i * b..(i + 1) * b].copy_from_slice(&inb[j * b..(j + 1) * b]);
            }
            k <<= 1;
        }
        // Position i now holds the block from rank r - i.
        for i in 0..p {
            let from = (r + p - i) % p;
            recv[from * b..(from + 1) * b].copy_from_slice(&tmp[i * b..(i + 1) * b]);
        }
        Ok(())
    }

    /// Pairwise-exchange alltoall(v): step `s` sends to `r + s` and receives from `r - s`.
    pub(crate) async fn alltoall_pairwise(
        &self,
        send: &[u8],
        send_bounds: &dyn Fn(usize) -> (usize, usize),
        recv: &mut [u8],
        recv_bounds: &dyn Fn(usize) -> (usize, usize),
        t: u32,
    ) -> Result<()> {
        let (r, p) = (self.rank() as usize, self.size() as usize);
        let (ss, sl) = send_bounds(r);
        let (rs, rl) = recv_bounds(r);
        let n = sl.min(rl);
        recv[rs..rs + n].copy_from_slice(&send[ss..ss + n]);
        for s in 1..p {
            let dst = (r + s) % p;
            let src = (r + p - s) % p;
            let (ss, sl) = send_bounds(dst);
            let (rs, rl) = recv_bounds(src);
            self.coll_sendrecv(
                dst as i32,
                &send[ss..ss + sl],
                src as i32,
                t,
                &mut recv[rs..rs + rl],
            )
            .await?;
        }
        Ok(())
    }

    /// Binomial gather of equal blocks to `root`; returns the gathered bytes on the root.
    pub(crate) async fn gather_binomial(
        &self,
        mine: &[u8],
        root: i32,
        t: u32,
    ) -> Result<Option<Vec<u8>>> {
        let (r, p) = (self.rank(), self.size());
        let b = mine.len();
        let vr = rel(r, root, p);
        let mut acc = mine.to_vec();
        let mut mask = 1;
        while mask < p {
            if vr & mask == 0 {
                let src = vr | mask;
                if src < p {
                    let blocks = mask.min(p - src) as usize;
                    let mut tmp = vec![0u8; blocks * b];
                    self.coll_recv(abs(src, root, p), t, &mut tmp).await?;
                    acc.extend_from_slice(&tmp);
                }
            } else {
                self.coll_send(abs(vr & !mask, root, p), t, &acc).await?;
                return Ok(None);
            }
            mask <<= 1;
        }
        // acc holds blocks in relative order; put them in rank order.
        let mut out = vec![0u8; b * p as usize];
        for v in 0..p as usize {
            let owner = abs(v as i32, root, p) as usize;
            out[owner * b..(owner + 1) * b].copy_from_slice(&acc[v * b..(v + 1) * b]);
        }
        Ok(Some(out))
    }

    /// Binomial scatter of equal blocks from `root` (`all` meaningful on the root only).
    pub(crate) async fn scatter_binomial(
        &self,
        all: &[u8],
        out: &mut [u8],
        root: i32,
        t: u32,
    ) -> Result<()> {
        let (r, p) = (self.rank(), self.size());
        let b = out.len();
        let vr = rel(r, root, p);
        // `held` holds the blocks of relative ranks vr .. vr + held.len() / b.
        let mut held: Vec<u8>;
        let mut mask = 1;
        if vr == 0 {
            held = vec![0u8; b * p as usize];
            for v in 0..p as usize {
                let owner = abs(v as i32, root, p) as usize;
                held[v * b..(v + 1) * b].copy_from_slice(&all[owner * b..(owner + 1) * b]);
            }
            while mask < p {
                mask <<= 1;
            }
        } else {
            loop {
                if vr & mask != 0 {
                    let blocks = mask.min(p - vr) as usize;
                    held = vec![0u8; blocks * b];
                    self.coll_recv(abs(vr - mask, root, p), t, &mut held)
                        .await?;
                    break;
                }
                mask <<= 1;
            }
        }
        mask >>= 1;
        while mask > 0 {
            if vr + mask < p {
                let blocks = mask.min(p - vr - mask) as usize;
                let s = mask as usize * b;
                self.coll_send(abs(vr + mask, root, p), t, &held[s..s + blocks * b])
                    .await?;
            }
            mask >>= 1;
        }
        out.copy_from_slice(&held[..b]);
        Ok(())
    }

    /// Linear gatherv to this rank (the root): block `i` (by `bounds`) of `out` from rank `i`.
    pub(crate) async fn gatherv_linear(
        &self,
        mine: &[u8],
        out: &mut [u8],
        bounds: &[(usize, usize)],
        t: u32,
    ) -> Result<()> {
        for (i, &(s, l)) in bounds.iter().enumerate() {
            if i as i32 == self.rank() {
                out[s..s + l].copy_from_slice(mine);
            } else {
                self.coll_recv(i as i32, t, &mut out[s..s + l]).await?;
            }
        }
        Ok(())
    }

    /// Linear scatterv from this rank (the root): block `i` (by `bounds`) of `all` to rank `i`.
    pub(crate) async fn scatterv_linear(
        &self,
        all: &[u8],
        mine: &mut [u8],
        bounds: &[(usize, usize)],
        t: u32,
    ) -> Result<()> {
        for (i, &(s, l)) in bounds.iter().enumerate() {
            if i as i32 == self.rank() {
                mine.copy_from_slice(&all[s..s + l]);
            } else {
                self.coll_send(i as i32, t, &all[s..s + l]).await?;
            }
        }
        Ok(())
    }

    /// Recursive-doubling scan (`exclusive`: exscan). On return `result` holds this rank's
    /// prefix (left untouched on rank 0 for exscan).
    pub(crate) async fn scan_recursive_doubling(
        &self,
        mine: &[u8],
        result: &mut [u8],
        kind: Kind,
        op: SystemOperation,
        exclusive: bool,
        t: u32,
    ) -> Result<()> {
        let (r, p) = (self.rank(), self.size());
        let mut partial = mine.to_vec();
        let mut have = !exclusive;
        if !exclusive {
            result.copy_from_slice(mine);
        }
        let mut tmp = vec![0u8; mine.len()];
        let mut mask = 1;
        while mask < p {
            let dst = r ^ mask;
            if dst < p {
                let out = partial.clone();
                self.coll_sendrecv(dst, &out, dst, t, &mut tmp).await?;
                if r > dst {
                    // tmp covers lower ranks: it goes on the left.
                    let mut left = tmp.clone();
                    apply(op, kind, &mut left, &partial)?;
                    partial = left;
                    if have {
                        let mut l = tmp.clone();
                        apply(op, kind, &mut l, result)?;
                        result.copy_from_slice(&l);
                    } else {
                        result.copy_from_slice(&tmp);
                        have = true;
                    }
                } else {
                    apply(op, kind, &mut partial, &tmp)?;
                }
            }
            mask <<= 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::chunk;

    #[test]
    fn chunks_cover_the_buffer_in_whole_elements() {
        for n in [0usize, 4, 12, 40, 44] {
            for p in 1..6 {
                let mut next = 0;
                for i in 0..p {
                    let (s, l) = chunk(n, 4, p, i);
                    assert_eq!(s, next);
                    assert_eq!(l % 4, 0);
                    next = s + l;
                }
                assert_eq!(next, n);
            }
        }
    }
}
