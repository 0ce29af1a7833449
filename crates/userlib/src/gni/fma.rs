//! The CDM's FMA descriptor as user space drives it (docs/gemini-programming.md, "FMA
//! descriptors"): QW2 and `BASE_OFFSET` through the mapped user alias page, stores into the
//! mapped windows, the scratch registers, `CQ_WRITE` and `SYNC_COMPLETE`. Every post is one
//! sequence (SSID) closed by `SYNC_COMPLETE`; the library keeps a budget of sequences it may
//! open without looking at `STATUS`, so it never asks for more than the 255 the descriptor
//! can track (the NIC would silently refuse them).

use std::sync::Arc;
use std::time::Duration;

use driver::gemini::hw::MmioWindow;
use driver::gemini::{CdmId, CqId, KgniClient, Request};
use driver::pci::{MAX_BURST, Mmio};
use firmware_spec::gemini::fma::{
    self, FmaDescriptor, FmaMode2, GetControlWord, SyncType, compose_base_offset, reg,
};
use firmware_spec::gemini::gni::{DlvrMode, ReturnCode};
use firmware_spec::gemini::limits;

use super::error::{GniError, Result};
use super::wait::{ProgressHook, poll_until};

/// `ERR_RC` of a descriptor page: the `gni_return_t` of the last locally rejected request
/// (docs/gemini-programming.md, ours).
pub(crate) const ERR_RC: u64 = 0x50;
/// Most sequences one descriptor tracks (`GHAL_FMA_SSID` 8-bit count, `gemini_hw.h`).
const MAX_SEQUENCES: u64 = limits::SSID_ENTRIES;
/// How long a CQ switch waits for the descriptor's sequences to finish.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes read from user memory at a time for a PUT.
const COPY_CHUNK: u64 = 64 * 1024;

/// Which FMA window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Win {
    /// PUT, write-combining.
    PutWc,
    /// PUT, uncached.
    PutUc,
}

/// Where a post goes: QW2 contents and the PE.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    /// Descriptor `command` (0, PUT_MSG, or an AMO code & 0x1F).
    pub(crate) command: u64,
    /// Remote MDH.
    pub(crate) rem_mdh: u16,
    /// Local MDH (GET and fetching AMO landing).
    pub(crate) src_mdh: u16,
    /// Delivery mode (adaptive routing bits of `mode2`).
    pub(crate) dlvr: DlvrMode,
    /// Remote PE (logical with the job's NTT, else physical).
    pub(crate) pe: u32,
}

/// The descriptor's mapped pages and what the library knows of its registers.
pub(crate) struct Fma {
    page: Arc<MmioWindow>,
    put_wc: Arc<MmioWindow>,
    get: Arc<MmioWindow>,
    put_uc: Arc<MmioWindow>,
    /// Bytes of each window.
    window: u64,
    /// Skip stores of QW2 / BASE_OFFSET that would not change them (off when the
    /// descriptor is shared with other CDMs, which may change them behind our back).
    cache: bool,
    qw2: Option<u64>,
    base: Option<u64>,
    /// The CQ the driver programmed as the descriptor's `cq_hndl`.
    cq: Option<u32>,
    /// Sequences that may still be opened without reading `STATUS`.
    budget: u64,
    next_tid: u16,
    /// The QW2 image last composed, by (command, remote MDH, local MDH, mode2): composing
    /// it is a whole-descriptor encode.
    qw2_of: Option<((u64, u16, u16, u64), u64)>,
}

impl Fma {
    pub(crate) fn new(
        page: Arc<MmioWindow>,
        put_wc: Arc<MmioWindow>,
        get: Arc<MmioWindow>,
        put_uc: Arc<MmioWindow>,
        window: u64,
        cache: bool,
    ) -> Fma {
        Fma {
            page,
            put_wc,
            get,
            put_uc,
            window: window.max(8),
            cache,
            qw2: None,
            base: None,
            cq: None,
            budget: 0,
            next_tid: 0,
            qw2_of: None,
        }
    }

    fn mode2(dlvr: DlvrMode) -> FmaMode2 {
        if !dlvr.may_reorder() {
            return FmaMode2::empty();
        }
        if dlvr.contains(DlvrMode::NO_RADAPT) {
            FmaMode2::ADP_ENABLE
        } else {
            FmaMode2::ADP_ENABLE | FmaMode2::RADP_ENABLE
        }
    }

    /// Point the descriptor at `roff` of the target's memory domain (QW2, then
    /// BASE_OFFSET with PE mask mode 0: PE above the 40-bit offset).
    pub(crate) fn aim(&mut self, t: &Target, roff: u64) -> Result<()> {
        let mode2 = u64::from(Self::mode2(t.dlvr).bits());
        let key = (t.command, t.rem_mdh, t.src_mdh, mode2);
        let qw2 = match self.qw2_of {
            Some((k, q)) if k == key => q,
            _ => {
                let d = FmaDescriptor {
                    command: t.command,
                    rem_mem_dh: u64::from(t.rem_mdh),
                    src_mem_dh: u64::from(t.src_mdh),
                    pe_mask_mode: 0,
                    mode2,
                    ..FmaDescriptor::default()
                };
                let img = d
                    .encode()
                    .map_err(|_| GniError::param("FMA descriptor fields out of range"))?;
                let mut q = [0u8; 8];
                q.copy_from_slice(&img[8..16]);
                let q = u64::from_le_bytes(q);
                self.qw2_of = Some((key, q));
                q
            }
        };
        if !(self.cache && self.qw2 == Some(qw2)) {
            self.page.write_u64(reg::QW2, qw2)?;
            self.qw2 = Some(qw2);
        }
        if roff >= 1 << fma::OFFSET_WIDTH {
            return Err(GniError::param("remote offset wider than 40 bits"));
        }
        let base = compose_base_offset(0, u64::from(t.pe), roff);
        if !(self.cache && self.base == Some(base)) {
            self.page.write_u64(reg::BASE_OFFSET, base)?;
            self.base = Some(base);
        }
        Ok(())
    }

    /// Make sure `n` sequences can be opened: `GNI_RC_ERROR_RESOURCE` when the descriptor
    /// already tracks too many.
    pub(crate) fn reserve(&mut self, n: u64) -> Result<()> {
        if self.budget < n {
            let w = self.page.read_u64(reg::STATUS)?;
            let in_use = (w >> fma::SSID_SHIFT) & fma::SSID_MASK;
            if (w >> fma::FLAG_SHIFT) & 0x7 != 0 {
                // A rejected request: its sequence reported the error in a CQE; clear the
                // flags and ERR_RC so the next one is seen.
                let rc = self.page.read_u64(ERR_RC)?;
                tracing::debug!(
                    status = w,
                    err_rc = rc,
                    "gni: FMA descriptor reported a rejected request"
                );
                self.page.write_u64(reg::STATUS, 0)?;
            }
            self.budget = MAX_SEQUENCES.saturating_sub(in_use);
            if self.budget < n {
                return Err(GniError::new(
                    ReturnCode::ErrorResource,
                    "the FMA descriptor has too many transactions in flight",
                ));
            }
        }
        self.budget -= n;
        Ok(())
    }

    /// A fresh transaction id (16 bits, never 0) not in use according to `busy`.
    pub(crate) fn tid(&mut self, busy: impl Fn(u16) -> bool) -> u16 {
        for _ in 0..u16::MAX {
            self.next_tid = self.next_tid.wrapping_add(1);
            if self.next_tid != 0 && !busy(self.next_tid) {
                return self.next_tid;
            }
        }
        self.next_tid
    }

    /// Make `cq` the descriptor's CQ (a privileged field: a kgni request). Switching waits
    /// until the descriptor has no sequence in flight, so no completion lands in the wrong
    /// CQ.
    pub(crate) fn ensure_cq(
        &mut self,
        client: &KgniClient,
        cdm: CdmId,
        hook: impl FnOnce() -> Option<ProgressHook>,
        cq: u32,
    ) -> Result<()> {
        if self.cq == Some(cq) {
            return Ok(());
        }
        if self.cq.is_some() {
            let page = Arc::clone(&self.page);
            let hook = hook();
            poll_until(hook.as_ref(), Some(QUIESCE_TIMEOUT), || {
                let w = page.read_u64(reg::STATUS)?;
                Ok(((w >> fma::SSID_SHIFT) & fma::SSID_MASK == 0).then_some(()))
            })
            .map_err(|_| {
                GniError::new(
                    ReturnCode::ErrorResource,
                    "FMA transactions still in flight on another CQ",
                )
            })?;
        }
        client.request(Request::FmaSetCq {
            cdm,
            cq: Some(CqId(cq)),
        })?;
        self.cq = Some(cq);
        Ok(())
    }

    fn window(&self, w: Win) -> &Arc<MmioWindow> {
        match w {
            Win::PutWc => &self.put_wc,
            Win::PutUc => &self.put_uc,
        }
    }

    /// Store `bytes` at window offsets from `at` with the widest naturally aligned stores.
    /// Into a write-combining window (`wc`), runs of whole aligned 64-bit stores leave as
    /// write-combined bursts of up to [`MAX_BURST`] bytes that do not cross a burst-sized
    /// boundary (one access to the device each, as a CPU's write-combining buffer flushes
    /// consecutive stores as one PCIe write); the device sees the same stores in the same
    /// order.
    fn store(win: &MmioWindow, wc: bool, at: u64, bytes: &[u8]) -> Result<()> {
        let mut off = 0usize;
        while off < bytes.len() {
            let rest = bytes.len() - off;
            let o = at + off as u64;
            if wc && rest >= 16 && o.is_multiple_of(8) {
                let to_boundary = (MAX_BURST as u64 - o % MAX_BURST as u64) as usize;
                let n = (rest & !7).min(to_boundary);
                if n >= 16 {
                    win.write_burst(o, &bytes[off..off + n])?;
                    off += n;
                    continue;
                }
            }
            let w = [8usize, 4, 2, 1]
                .into_iter()
                .find(|&w| w <= rest && o.is_multiple_of(w as u64))
                .unwrap_or(1);
            win.write(o, &bytes[off..off + w])?;
            off += w;
        }
        Ok(())
    }

    /// PUT (or PUT_MSG, by `t.command`) of `len` bytes produced by `fill` (which copies
    /// the bytes at a given offset into the buffer) to `roff` onwards.
    pub(crate) fn put(
        &mut self,
        win: Win,
        t: &Target,
        roff: u64,
        len: u64,
        mut fill: impl FnMut(u64, &mut [u8]) -> Result<()>,
    ) -> Result<()> {
        let mut done = 0u64;
        let mut buf = Vec::new();
        while done < len {
            let chunk = (len - done).min(self.window);
            self.aim(t, roff + done)?;
            let mut w = 0u64;
            while w < chunk {
                let n = (chunk - w).min(COPY_CHUNK);
                buf.resize(n as usize, 0);
                fill(done + w, &mut buf)?;
                Self::store(self.window(win), win == Win::PutWc, w, &buf)?;
                w += n;
            }
            done += chunk;
        }
        if len == 0 {
            self.aim(t, roff)?;
        }
        Ok(())
    }

    /// Bytes of each window (the farthest a store may land from `BASE_OFFSET`).
    pub(crate) fn window_bytes(&self) -> u64 {
        self.window
    }

    /// Store `bytes` at window offset `at` of the current aim (no `BASE_OFFSET` store): a
    /// sender that keeps the descriptor aimed at the start of a remote region reaches any
    /// place in it within the window with data stores alone. `at + bytes.len()` must not
    /// pass [`Fma::window_bytes`].
    pub(crate) fn store_at(&mut self, win: Win, at: u64, bytes: &[u8]) -> Result<()> {
        if at.saturating_add(bytes.len() as u64) > self.window {
            return Err(GniError::param("store beyond the FMA window"));
        }
        Self::store(self.window(win), win == Win::PutWc, at, bytes)
    }

    /// One 8-byte store at window offset 0 (a message control word, a non-fetching AMO
    /// trigger).
    pub(crate) fn store_u64(&mut self, win: Win, v: u64) -> Result<()> {
        self.window(win).write_u64(0, v)?;
        Ok(())
    }

    /// GET of `len` bytes (a multiple of 4) from `roff` into local offset `loff` of the
    /// descriptor's source MDH: GCWs of up to 64 bytes. With `flag`, the last GCW asks for
    /// a flagged response (4 bytes after the data).
    pub(crate) fn get(
        &mut self,
        t: &Target,
        roff: u64,
        loff: u64,
        len: u64,
        flag: bool,
    ) -> Result<()> {
        let mut done = 0u64;
        while done < len {
            let chunk = (len - done).min(self.window);
            self.aim(t, roff + done)?;
            let mut w = 0u64;
            while w < chunk {
                let n = (chunk - w).min(fma::GCW_MAX_BYTES);
                let count = GetControlWord::count_for(n).ok_or(GniError::new(
                    ReturnCode::AlignmentError,
                    "GET length must be a multiple of 4 on Gemini",
                ))?;
                let last = done + w + n == len;
                let gcw = GetControlWord {
                    local_offset: loff + done + w,
                    count,
                    gb: u64::from(flag && last),
                    cmd: 0,
                };
                let v = gcw
                    .to_u64()
                    .map_err(|_| GniError::param("GET local offset out of range"))?;
                self.get.write_u64(w, v)?;
                w += n;
            }
            done += chunk;
        }
        Ok(())
    }

    /// A fetching AMO: operands in the scratch registers, a GCW with the AMO command; the
    /// old value lands at `loff`.
    pub(crate) fn amo_fetch(
        &mut self,
        t: &Target,
        roff: u64,
        loff: u64,
        cmd: u64,
        ops: (u64, u64),
        flag: bool,
    ) -> Result<()> {
        self.aim(t, roff)?;
        self.scratch(ops)?;
        let gcw = GetControlWord {
            local_offset: loff,
            count: GetControlWord::count_for(8).unwrap_or(1),
            gb: u64::from(flag),
            cmd,
        };
        let v = gcw
            .to_u64()
            .map_err(|_| GniError::param("AMO local offset out of range"))?;
        self.get.write_u64(0, v)?;
        Ok(())
    }

    /// The scratch registers (AMO operands, or the sync flag value and offset).
    pub(crate) fn scratch(&mut self, (s0, s1): (u64, u64)) -> Result<()> {
        self.page.write_u64(reg::SCRATCH0, s0)?;
        self.page.write_u64(reg::SCRATCH1, s1)?;
        Ok(())
    }

    /// The CQ-write doorbell: a CQ write of `value` to the target domain's CQ.
    pub(crate) fn cq_write(&mut self, value: u64) -> Result<()> {
        self.page.write_u64(reg::CQ_WRITE, value)?;
        Ok(())
    }

    /// Close the sequence: `SYNC_COMPLETE` with the events of `sync` and 56 bits of data.
    pub(crate) fn sync(&mut self, sync: SyncType, data56: u64) -> Result<()> {
        self.page
            .write_u64(reg::SYNC_COMPLETE, fma::sync_complete_word(sync, data56))?;
        Ok(())
    }

    /// The status word (`wc | rc << 16 | ssid << 32 | flags << 48`).
    pub(crate) fn status(&self) -> Result<u64> {
        Ok(self.page.read_u64(reg::STATUS)?)
    }
}
