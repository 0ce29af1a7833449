//! Where a request's bytes come from ([`Source`]: inline in the command, or a local buffer
//! read through the ATU), and the trains that carry a put's frames without copying them.

use emu_core::engine::DeviceIo;
use emu_core::fabric::Train;
use firmware_spec::cassini::rc::ReturnCode;
use std::sync::Arc;

use crate::atu::Mapped;
use crate::wire::{self, MTU};

use super::ctx::IxeCtx;

/// Where a request's data comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    Inline(&'a [u8]),
    /// A local buffer named by LAC (resolved through the CQ's RGID before use).
    Dma {
        lac: u8,
        addr: u64,
    },
    /// A local buffer in AC `ac`, already checked.
    Ac {
        ac: u16,
        addr: u64,
    },
    /// A local buffer checked and translated once ([`Mapped`]; `addr` is its IOVA).
    Mapped {
        m: &'a Mapped,
        addr: u64,
    },
}

/// Reading a request's source, on anything that provides an [`IxeCtx`].
pub(crate) trait IxeSource: IxeCtx {
    /// Append `len` bytes of the request source at `off` to `data`.
    fn append_source(
        &mut self,
        io: &mut DeviceIo<'_>,
        data: &mut Vec<u8>,
        src: Source<'_>,
        off: usize,
        len: usize,
    ) -> Result<(), ReturnCode> {
        if len == 0 {
            return Ok(());
        }
        match src {
            Source::Inline(b) => {
                data.extend_from_slice(b.get(off..off + len).unwrap_or(&[]));
                Ok(())
            }
            Source::Ac { ac, addr } => {
                let at = data.len();
                data.resize(at + len, 0);
                self.atu()
                    .read(io.dma(), ac, addr + off as u64, &mut data[at..at + len])
            }
            Source::Mapped { m, addr } => {
                let at = data.len();
                data.resize(at + len, 0);
                self.atu()
                    .read_in(io.dma(), m, addr + off as u64, &mut data[at..at + len])
            }
            Source::Dma { .. } => Err(ReturnCode::InvalidAc),
        }
    }

    /// The train of the continuation frames of a put of `total` bytes from `addr` of AC
    /// `ac` (translated as `m`) whose first frame carries `first` bytes: the source's bus
    /// segments of the rest, and the frames and wire bytes they stand for. `None` if the
    /// range can no longer be translated (the frames then go one by one).
    fn train_of(
        &mut self,
        io: &DeviceIo<'_>,
        m: &Mapped,
        ac: u16,
        addr: u64,
        first: usize,
        total: usize,
    ) -> Option<Arc<Train>> {
        let n = (total - first) as u64;
        let need = emu_core::dma::Perm::READ;
        let segments = self
            .atu()
            .segments_of(
                io.dma(),
                Some(m),
                ac,
                addr + first as u64,
                n,
                need,
                MTU as u64,
            )
            .ok()?;
        let frames = (total - first).div_ceil(MTU);
        let per_frame = wire::FAB_HDR + wire::CONTINUATION_HDR + wire::TAG_ROOM;
        Some(Arc::new(Train {
            frames: u32::try_from(frames).ok()?,
            bytes: (frames * per_frame) as u64 + n,
            source: io.dma().clone(),
            segments,
        }))
    }
}

impl<T: IxeCtx + ?Sized> IxeSource for T {}
