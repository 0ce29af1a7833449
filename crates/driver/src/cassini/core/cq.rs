//! Command queues (`cxi_cq.c`): transmit and target CQs, their rings and launch pages.

use super::*;

/// `MIN_CQ_COUNT` (cass_cq.c): the smallest ring, in commands.
const MIN_CQ_COUNT: u32 = 64;

impl Op<'_> {
    // ---- Command queues ----

    pub(crate) fn cq_alloc(&mut self, c: &CqAllocCmd) -> Result<CqAllocResp, Errno> {
        self.cq_alloc_buf(&CqAllocBufCmd {
            lni: c.lni,
            eq: c.eq,
            opts: CqAllocOptsBuf {
                opts: c.opts,
                ..CqAllocOptsBuf::default()
            },
            ..CqAllocBufCmd::default()
        })
    }

    /// CQ_ALLOC_BUF (CQ_ALLOC is the same without a buffer), with the checks of
    /// `cxi_user_cq_alloc_buf` and `cxi_cq_alloc_buf_internal` (cass_cq.c) in their order.
    pub(crate) fn cq_alloc_buf(&mut self, c: &CqAllocBufCmd) -> Result<CqAllocResp, Errno> {
        let rgid = self.lni(c.lni)?.rgid;
        self.check_eq(c.eq)?;
        let tle_pool = self.service_of(c.lni)?.tle_pool;
        let o = &c.opts.opts;
        let flags = CqAllocFlags(o.flags);
        let tx = flags.contains(CqAllocFlags::IS_TX);
        if o.policy > 3 || (!tx && o.lpe_cdt_thresh_id > 3) {
            return Err(Errno::Einval);
        }
        // At least 64 commands, rounded up to a power-of-two number of pages; more than
        // CXI_MAX_CQ_COUNT is E2BIG (cass_cq.c).
        let bytes = (u64::from(o.count.max(MIN_CQ_COUNT)) * 64)
            .max(PAGE_SIZE)
            .next_power_of_two();
        let slots = bytes / 64;
        if slots > lim::CXI_MAX_CQ_COUNT as u64 {
            return Err(Errno::E2big);
        }
        let slots = slots as u32;
        if flags.unknown_bits() != 0 || o.stat_cnt_pool > 3 {
            return Err(Errno::Einval);
        }
        if !tx
            && (flags.contains(CqAllocFlags::TX_ETHERNET)
                || flags.contains(CqAllocFlags::TX_WITH_TRIG_CMDS))
        {
            return Err(Errno::Einval);
        }
        if tx {
            // A triggered queue uses LCID 0 only; a transmit queue needs a communication
            // profile at its LCID (`cass_cp_find`).
            if flags.contains(CqAllocFlags::TX_WITH_TRIG_CMDS) && o.lcid != 0 {
                return Err(Errno::Einval);
            }
            let has_cp =
                o.lcid < lim::C_COMM_PROF_PER_CQ as u32 && self.lni(c.lni)?.lcids.is_used(o.lcid);
            if !has_cp {
                return Err(Errno::Einval);
            }
        }
        if flags.contains(CqAllocFlags::TX_ETHERNET) && !self.creds().admin {
            return Err(Errno::Eperm);
        }
        if c.opts.buf != 0 {
            // A ring in the caller's memory must be page aligned and physically contiguous
            // host memory; device memory comes through dmabuf. Neither is offered here.
            if !c.opts.buf.is_multiple_of(PAGE_SIZE) {
                return Err(Errno::Einval);
            }
            return Err(Errno::Eopnotsupp);
        }
        self.check_limit(c.lni, if tx { rsrc::TXQ } else { rsrc::TGQ })?;
        let n = if tx {
            self.st.txq.alloc()
        } else {
            self.st.tgq.alloc()
        }
        .ok_or(Errno::Enospc)?;
        let free_n = |st: &mut DevState| {
            if tx {
                st.txq.free(n);
            } else {
                st.tgq.free(n);
            }
        };
        let ring = match PageBlock::alloc(&self.dev.mem, bytes) {
            Ok(r) => r,
            Err(e) => {
                free_n(self.st);
                return Err(enomem(e));
            }
        };
        let cfg = CqConfig {
            ring: ring.bus_address(0),
            slots,
            eq: c.eq,
            rgid,
            lcid: o.lcid,
            policy: o.policy as u8,
            acid: PHYS_ACID,
            stat_cnt_pool: o.stat_cnt_pool as u8,
            trig: flags.contains(CqAllocFlags::TX_WITH_TRIG_CMDS),
            tle_pool: tle_pool as u8,
        };
        let r = if tx {
            self.hw().txq_enable(n, &cfg)
        } else {
            self.hw().tgq_enable(n, &cfg)
        };
        if let Err(e) = r {
            let _ = if tx {
                self.hw().txq_disable(n)
            } else {
                self.hw().tgq_disable(n)
            };
            free_n(self.st);
            return Err(eio(e));
        }
        let shared = MapShared::new();
        let handle = if tx {
            n
        } else {
            lim::C_NUM_TRANSMIT_CQS as u32 + n
        };
        let launch = if tx {
            hw::txq_launch_offset(n)
        } else {
            hw::tgq_launch_offset(n)
        };
        let cmds = self.new_token(
            bytes,
            MapTarget::Memory {
                pages: Arc::clone(&ring),
                offset: 0,
                len: bytes,
            },
            &shared,
        )?;
        let wp_addr = self.new_token(
            MMIO_PAGE,
            MapTarget::Mmio {
                offset: launch,
                len: MMIO_PAGE,
            },
            &shared,
        )?;
        self.eq_ref(c.eq)?;
        self.st.cqs.insert(
            handle,
            Cq {
                client: self.client,
                lni: c.lni,
                tx,
                n,
                eq: c.eq,
                ring,
                tokens: [cmds.offset, wp_addr.offset],
                shared,
            },
        );
        svc_use(self.st, c.lni, if tx { rsrc::TXQ } else { rsrc::TGQ }, 1);
        lni_ref(self.st, c.lni, 1);
        Ok(CqAllocResp {
            cq: handle,
            count: slots,
            cmds,
            wp_addr,
        })
    }

    pub(crate) fn cq_free(&mut self, c: &CqFreeCmd) -> Result<(), Errno> {
        let cq = owned!(self.st.cqs, c.cq, self.client);
        if Arc::strong_count(&cq.shared) > 1 + 2 {
            // Still mmapped (the queue and its two tokens hold three references).
            return Err(Errno::Ebusy);
        }
        self.dev.free_cq(self.st, c.cq);
        Ok(())
    }

    pub(crate) fn cq_ack_counter(
        &mut self,
        c: &CqAckCounterCmd,
    ) -> Result<CqAckCounterResp, Errno> {
        let cq = owned!(self.st.cqs, c.cq, self.client);
        let (tx, n) = (cq.tx, cq.n);
        let ack_counter = self.hw().cq_ack_counter(tx, n).map_err(eio)?;
        Ok(CqAckCounterResp { ack_counter })
    }
}
