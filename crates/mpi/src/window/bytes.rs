//! Byte windows whose element type is given at each call ([`Kind`]), as the C bindings use
//! them: accumulates the NIC does natively on a word, and the others element by element with
//! compare-and-swap.

use super::*;

/// Byte windows whose elements are described by a [`Kind`] at each call, as the C bindings
/// use them (displacements in bytes).
impl Window<u8> {
    fn check_kind(
        &self,
        kind: Kind,
        target: CommRank,
        disp: usize,
        len: usize,
    ) -> Result<(usize, usize)> {
        let size = kind.size();
        if size == 0 || !len.is_multiple_of(size) {
            return Err(Error::Count(format!(
                "{len} bytes are not a whole number of {size}-byte elements"
            )));
        }
        let (_, off) = self.check(target, disp, len)?;
        Ok((off, size))
    }

    /// One 64-bit NIC atomic on the word at `off` of `target`'s part; the old word.
    fn word_atomic(
        &mut self,
        target: CommRank,
        off: usize,
        op: AmoOp,
        operand: u64,
        compare: u64,
    ) -> Result<u64> {
        let id = self.atomic_typed(
            target,
            off,
            op,
            AmoType::U64,
            &operand.to_le_bytes(),
            &compare.to_le_bytes(),
            true,
        )?;
        match wait_op(&self.comm.core, id)? {
            Completion::Fetched(b) => value_from_bytes(&b),
            c => Err(Error::Rma(format!("a word atomic completed as {c:?}"))),
        }
    }

    /// An element operation the NIC cannot do (an element type or operation its atomics lack),
    /// done atomically all the same: a compare-and-swap loop on the 64-bit word holding the
    /// element, as MPI libraries do over NICs with few atomics. `update` maps the element's
    /// old bytes to its new bytes (`None`: leave it); returns the old bytes.
    fn element_by_cas(
        &mut self,
        target: CommRank,
        off: usize,
        size: usize,
        update: impl Fn(&[u8]) -> Result<Option<Vec<u8>>>,
    ) -> Result<Vec<u8>> {
        let word = off & !7;
        let shift = off - word;
        if shift + size > 8 || word + 8 > HEADER + self.len {
            return Err(Error::Op(format!(
                "no NIC atomic for this element, and a {size}-byte element at offset {} does not \
                 sit in an 8-byte word of the window (a compare-and-swap loop needs one)",
                off - HEADER
            )));
        }
        let mut old = self.word_atomic(target, word, AmoOp::Sum, 0, 0)?;
        let mut w = crate::progress::Waiter::new();
        loop {
            let bytes = old.to_le_bytes();
            let cur = bytes[shift..shift + size].to_vec();
            let Some(new_part) = update(&cur)? else {
                return Ok(cur);
            };
            let mut nb = bytes;
            nb[shift..shift + size].copy_from_slice(&new_part);
            let new = u64::from_le_bytes(nb);
            let prev = self.word_atomic(target, word, AmoOp::CompareSwap, new, old)?;
            if prev == old {
                return Ok(cur);
            }
            old = prev;
            w.tick(&self.comm.core, &"a compare-and-swap loop")?;
        }
    }

    /// `acc op x` for one element of `kind` (the new target value of an accumulate).
    fn combine(kind: Kind, op: AccumulateOp, acc: &[u8], x: &[u8]) -> Result<Option<Vec<u8>>> {
        match op {
            AccumulateOp::NoOp => Ok(None),
            AccumulateOp::Replace => Ok(Some(x.to_vec())),
            AccumulateOp::Op(o) => {
                let mut a = acc.to_vec();
                crate::op::apply(o, kind, &mut a, x)?;
                Ok(Some(a))
            }
        }
    }

    /// One element of an accumulate as a NIC atomic, in flight, when the NIC has the
    /// operation on elements of `kind` (`None` when it has not).
    fn native(
        &mut self,
        kind: Kind,
        target: CommRank,
        off: usize,
        op: AccumulateOp,
        x: &[u8],
        fetch: bool,
    ) -> Result<Option<OpId>> {
        let Ok((ty, aop)) = amo_type(kind).and_then(|ty| Ok((ty, op.amo()?))) else {
            return Ok(None);
        };
        match self.atomic_typed(target, off, aop, ty, x, &[], fetch) {
            Ok(id) => Ok(Some(id)),
            Err(Error::Op(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Elements the NIC has no atomic for, each `(offset, operand)` of `kind`, updated with
    /// compare-and-swap on the 64-bit words holding them, every word in flight at once: one
    /// fetch of each word, then one compare-and-swap of each (all elements of a word in one),
    /// repeated for the words another writer changed meanwhile. Each word's update is
    /// atomic, so each element's is. The old bytes of each element, in order.
    fn elements_by_cas(
        &mut self,
        kind: Kind,
        target: CommRank,
        op: AccumulateOp,
        elems: &[(usize, &[u8])],
    ) -> Result<Vec<Vec<u8>>> {
        let size = kind.size();
        // The words, in order of first use, and which elements each holds.
        let mut words: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, &(off, _)) in elems.iter().enumerate() {
            let word = off & !7;
            if off - word + size > 8 || word + 8 > HEADER + self.len {
                return Err(Error::Op(format!(
                    "no NIC atomic for this element, and a {size}-byte element at offset {} does \
                     not sit in an 8-byte word of the window (a compare-and-swap loop needs one)",
                    off - HEADER
                )));
            }
            match words.iter_mut().find(|w| w.0 == word) {
                Some(w) => w.1.push(i),
                None => words.push((word, vec![i])),
            }
        }
        let fetch = |me: &mut Self, word: usize, o: AmoOp, new: u64, old: u64| {
            me.atomic_typed(
                target,
                word,
                o,
                AmoType::U64,
                &new.to_le_bytes(),
                &old.to_le_bytes(),
                true,
            )
        };
        let ids = words
            .iter()
            .map(|w| fetch(self, w.0, AmoOp::Sum, 0, 0))
            .collect::<Result<Vec<_>>>()?;
        let mut olds = ids
            .into_iter()
            .map(|id| self.fetched_word(id))
            .collect::<Result<Vec<u64>>>()?;
        let mut out = vec![Vec::new(); elems.len()];
        let mut todo: Vec<usize> = (0..words.len()).collect();
        let mut waiter = crate::progress::Waiter::new();
        loop {
            let mut tries = Vec::with_capacity(todo.len());
            for &k in &todo {
                let (word, members) = &words[k];
                let mut bytes = olds[k].to_le_bytes();
                for &i in members {
                    let (off, x) = elems[i];
                    let at = off - word;
                    let cur = bytes[at..at + size].to_vec();
                    if let Some(v) = Self::combine(kind, op, &cur, x)? {
                        bytes[at..at + size].copy_from_slice(&v);
                    }
                    out[i] = cur;
                }
                let new = u64::from_le_bytes(bytes);
                if new == olds[k] {
                    // Nothing changes (MPI_NO_OP, or an identity): the read was atomic.
                    continue;
                }
                tries.push((k, fetch(self, *word, AmoOp::CompareSwap, new, olds[k])?));
            }
            let mut again = Vec::new();
            for (k, id) in tries {
                let prev = self.fetched_word(id)?;
                if prev != olds[k] {
                    olds[k] = prev;
                    again.push(k);
                }
            }
            if again.is_empty() {
                return Ok(out);
            }
            todo = again;
            waiter.tick(&self.comm.core, &"a compare-and-swap loop")?;
        }
    }

    /// The old word a fetching 64-bit atomic returned.
    fn fetched_word(&mut self, id: OpId) -> Result<u64> {
        match wait_op(&self.comm.core, id)? {
            Completion::Fetched(b) => value_from_bytes(&b),
            c => Err(Error::Rma(format!("a word atomic completed as {c:?}"))),
        }
    }

    /// `MPI_Accumulate` of `data` (elements of `kind`) at byte `disp` of `target`'s part;
    /// complete at the next synchronization. Operations and element types the NIC's atomics
    /// lack run as compare-and-swap loops on the elements' words, all words in flight at
    /// once (complete when this returns).
    pub fn accumulate_kind(
        &mut self,
        kind: Kind,
        data: &[u8],
        target: CommRank,
        disp: usize,
        op: AccumulateOp,
    ) -> Result<()> {
        let (off, size) = self.check_kind(kind, target, disp, data.len())?;
        let mut rest = Vec::new();
        for (i, x) in data.chunks_exact(size).enumerate() {
            let at = off + i * size;
            match self.native(kind, target, at, op, x, false)? {
                Some(id) => self.issued(target, id, ATOMIC_STAGING),
                None => rest.push((at, x)),
            }
        }
        if !rest.is_empty() {
            self.elements_by_cas(kind, target, op, &rest)?;
        }
        Ok(())
    }

    /// `MPI_Get_accumulate` / `MPI_Fetch_and_op`: the old elements (elements of `kind`), then
    /// `op` applied with `data`.
    pub fn get_accumulate_kind(
        &mut self,
        kind: Kind,
        data: &[u8],
        target: CommRank,
        disp: usize,
        op: AccumulateOp,
    ) -> Result<Vec<u8>> {
        let (off, size) = self.check_kind(kind, target, disp, data.len())?;
        let mut elems = Vec::with_capacity(data.len() / size);
        let mut rest = Vec::new();
        for (i, x) in data.chunks_exact(size).enumerate() {
            let at = off + i * size;
            let e = self.native(kind, target, at, op, x, true)?;
            if e.is_none() {
                rest.push((at, x));
            }
            elems.push(e);
        }
        let mut by_cas = if rest.is_empty() {
            Vec::new()
        } else {
            self.elements_by_cas(kind, target, op, &rest)?
        }
        .into_iter();
        let mut out = Vec::with_capacity(data.len());
        for e in elems {
            match e {
                None => out.extend(by_cas.next().unwrap_or_default()),
                Some(id) => match wait_op(&self.comm.core, id)? {
                    Completion::Fetched(b) => out.extend_from_slice(&b[..size.min(b.len())]),
                    c => return Err(Error::Rma(format!("a fetching atomic completed as {c:?}"))),
                },
            }
        }
        Ok(out)
    }

    /// `MPI_Compare_and_swap` on one element of `kind`: store `value` if the target equals
    /// `compare`; the old value. Element types the NIC's atomics lack run as a
    /// compare-and-swap loop on the element's 64-bit word.
    pub fn compare_and_swap_kind(
        &mut self,
        kind: Kind,
        value: &[u8],
        compare: &[u8],
        target: CommRank,
        disp: usize,
    ) -> Result<Vec<u8>> {
        let (off, size) = self.check_kind(kind, target, disp, value.len())?;
        if value.len() != size || compare.len() != size {
            return Err(Error::Count("compare-and-swap takes one element".into()));
        }
        if let Ok(ty) = amo_type(kind) {
            match self.atomic_typed(target, off, AmoOp::CompareSwap, ty, value, compare, true) {
                Ok(id) => {
                    return match wait_op(&self.comm.core, id)? {
                        Completion::Fetched(b) => Ok(b[..size.min(b.len())].to_vec()),
                        c => Err(Error::Rma(format!("a compare-and-swap completed as {c:?}"))),
                    };
                }
                Err(Error::Op(_)) => {}
                Err(e) => return Err(e),
            }
        }
        self.element_by_cas(target, off, size, |cur| {
            Ok((cur == compare).then(|| value.to_vec()))
        })
    }

    /// Where this rank's part of the window lives in this process, when it is this process's
    /// memory (the emulated node's RAM is): the NIC reads and writes these bytes, and a program
    /// may load and store them directly (MPI's unified memory model) instead of through
    /// [`local_read_bytes`](Self::local_read_bytes) / [`local_write`](Window::local_write).
    /// Valid for [`len`](Window::len) bytes until the window is dropped; 64-byte aligned.
    pub fn local_memory(&self) -> Option<*mut u8> {
        let base = self.comm.core.borrow_mut().transport.win_memory(self.win)?;
        Some(base.wrapping_add(HEADER))
    }

    /// Read `out.len()` bytes of this rank's part at byte `disp` (a local load).
    pub fn local_read_bytes(&self, disp: usize, out: &mut [u8]) -> Result<()> {
        let me = self.comm.rank();
        let (_, off) = self.check(me, disp, out.len())?;
        self.comm
            .core
            .borrow_mut()
            .transport
            .win_read(self.win, off, out)
    }
}
