//! Connections: an SMSG mailbox pair per peer, made either at init with every peer
//! (`MPICH_GNI_DYNAMIC_CONN=disabled`: mailbox regions published through PMI) or on first
//! traffic with a peer (the default) by a uGNI datagram exchange, as Cray MPICH does:
//!
//! - every rank keeps one wildcard datagram posted (`GNI_EpPostDataWId` on an unbound
//!   endpoint) whose payload is a spare mailbox of its own;
//! - the first message to a peer allocates a mailbox and posts a datagram bound to the peer
//!   with it; kgni matches it against the peer's wildcard (or the peer's own bound datagram
//!   when both dial at once) and swaps the payloads; each side binds, `GNI_SmsgInit`s, and the
//!   messages queued meanwhile go out;
//! - the listener learns of an exchange with `GNI_PostDataProbeById`, binds an endpoint to
//!   the peer the exchange names and posts a fresh wildcard.
//!
//! Should both ranks dial while each one's datagram is answered by the other's wildcard, two
//! mailbox pairs exist. Each rank sends on the first one it completed and reads from all, so
//! per-peer order holds without agreeing on one.
//!
//! Mailboxes are carved from registered blocks (one registration per [`MBOX_BLOCK`]
//! mailboxes); a fresh block is zeroed, and mailboxes are never reused.

use std::collections::VecDeque;

use firmware_spec::gemini::gni::{PostState, ReturnCode};
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::smsg::SmsgAttr;
use userlib::gni::smsg::{attr_from_bytes, attr_to_bytes, mailbox_attr};
use userlib::gni::{Ep, Nic};

use super::wire::{HEADER_LEN, Header};
use super::{GniTransport, Staged, mem_err, tr};
use crate::Rank;
use crate::error::{Error, Result};
use pmi::Pmi;

/// SMSG credits per mailbox.
pub(super) const CREDITS: u16 = 16;
/// Mailboxes per registered block (lazy connections).
pub(super) const MBOX_BLOCK: u32 = 8;
/// The id of the wildcard datagram.
const WILDCARD_ID: u64 = 1;
/// Ids of bound datagrams: this bit and the peer's rank.
const DIRECTED: u64 = 1 << 62;
/// Rejected dials this rank repeats before it gives up.
const DIAL_RETRIES: u32 = 10_000;

/// A message waiting for a connection or for SMSG credits.
pub(super) struct Outgoing {
    pub(super) header: [u8; HEADER_LEN],
    pub(super) data: Vec<u8>,
}

/// This rank's view of one peer.
#[derive(Default)]
pub(super) struct Peer {
    /// SMSG endpoints to the peer: the first carries this rank's messages, all are read.
    pub(super) eps: Vec<Ep>,
    /// A bound datagram in flight to the peer, with the mailbox it offers.
    dial: Option<(Ep, SmsgAttr)>,
    /// Messages waiting (for the connection, then for credits), in order.
    pub(super) backlog: VecDeque<Outgoing>,
}

/// The wildcard datagram and the spare mailbox it offers.
pub(super) struct Listen {
    ep: Ep,
    mbox: SmsgAttr,
}

/// Registered mailbox memory.
pub(super) struct Mailboxes {
    /// Bytes of one mailbox (8-byte multiple).
    pub(super) per: u32,
    /// The largest SMSG message (header + vshort payload).
    pub(super) maxsize: u32,
    pub(super) blocks: Vec<Staged>,
    /// Mailboxes of the newest block not yet handed out.
    left: u32,
}

impl Mailboxes {
    pub(super) fn new(vshort: usize) -> Result<Self> {
        let maxsize = u32::try_from(vshort + HEADER_LEN)
            .map_err(|_| Error::Transport("gni: SMSG message size".into()))?;
        let per = mailbox_attr(0, 0, MemHandle::default(), CREDITS, maxsize)
            .map_err(tr)?
            .buff_size
            .next_multiple_of(64);
        Ok(Mailboxes {
            per,
            maxsize,
            blocks: Vec::new(),
            left: 0,
        })
    }

    /// Register a block of `n` mailboxes whose events go to `rx`.
    pub(super) fn add_block(&mut self, nic: &Nic, rx: &userlib::gni::Cq, n: u32) -> Result<()> {
        let mem = nic
            .space()
            .alloc(u64::from(self.per) * u64::from(n.max(1)))
            .map_err(mem_err)?;
        let mh = super::register(nic, &mem, Some(rx), |_| {})?;
        self.blocks.push(Staged {
            mem,
            mh,
            user: None,
        });
        self.left = n;
        Ok(())
    }

    /// The attributes of mailbox `i` of the newest block.
    pub(super) fn attr(&self, i: u32) -> Result<SmsgAttr> {
        let b = self
            .blocks
            .last()
            .ok_or_else(|| Error::Transport("gni: no mailbox memory".into()))?;
        mailbox_attr(b.mem.va(), i * self.per, b.mh, CREDITS, self.maxsize).map_err(tr)
    }

    /// A fresh mailbox.
    fn take(&mut self, nic: &Nic, rx: &userlib::gni::Cq) -> Result<SmsgAttr> {
        if self.left == 0 {
            self.add_block(nic, rx, MBOX_BLOCK)?;
        }
        self.left -= 1;
        self.attr(MBOX_BLOCK - 1 - self.left)
    }
}

/// A rank's card in PMI: NIC address, instance, and (all-to-all setup) its mailbox region,
/// handle and per-peer mailbox size.
pub(super) fn card(nic: &Nic, rank: Rank, mbox: Option<(&Staged, u32)>) -> Vec<u8> {
    let mut card = Vec::with_capacity(36);
    card.extend_from_slice(&nic.address().to_le_bytes());
    card.extend_from_slice(&rank.to_le_bytes());
    if let Some((m, per)) = mbox {
        card.extend_from_slice(&m.mem.va().to_le_bytes());
        card.extend_from_slice(&m.mh.to_bytes());
        card.extend_from_slice(&per.to_le_bytes());
    }
    card
}

fn u32_at(c: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([c[o], c[o + 1], c[o + 2], c[o + 3]])
}

/// The NIC address and instance of `peer`, from its card.
fn address_of(pmi: &mut dyn Pmi, peer: Rank) -> Result<(Vec<u8>, u32, u32)> {
    let c = pmi.get(peer, "gni-card")?;
    if c.len() < 8 {
        return Err(Error::Transport(format!("gni: rank {peer}: a short card")));
    }
    let (addr, inst) = (u32_at(&c, 0), u32_at(&c, 4));
    Ok((c, addr, inst))
}

/// Connect to every peer at init: `mbox` is this rank's region of one mailbox per rank, every
/// card in PMI names the peer's region.
pub(super) fn connect_all(
    nic: &Nic,
    tx: &userlib::gni::Cq,
    pmi: &mut dyn Pmi,
    rank: Rank,
    size: u32,
    mboxes: &Mailboxes,
) -> Result<Vec<Peer>> {
    let mut peers: Vec<Peer> = (0..size).map(|_| Peer::default()).collect();
    for peer in (0..size).filter(|&p| p != rank) {
        let (c, addr, inst) = address_of(pmi, peer)?;
        if c.len() < 36 {
            return Err(Error::Transport(format!("gni: rank {peer}: a short card")));
        }
        let mut va = [0u8; 8];
        va.copy_from_slice(&c[8..16]);
        let their_mh = MemHandle::from_bytes(&c[16..32])
            .map_err(|_| Error::Transport(format!("gni: rank {peer}: a bad handle")))?;
        let ep = nic.ep_create(Some(tx)).map_err(tr)?;
        ep.bind(addr, inst).map_err(tr)?;
        let local = mboxes.attr(peer)?;
        let remote = mailbox_attr(
            u64::from_le_bytes(va),
            rank * u32_at(&c, 32),
            their_mh,
            CREDITS,
            mboxes.maxsize,
        )
        .map_err(tr)?;
        ep.smsg_init(&local, &remote).map_err(tr)?;
        peers[peer as usize].eps.push(ep);
    }
    Ok(peers)
}

impl GniTransport {
    /// `(NIC address, instance)` of `peer`, from its card (once).
    fn address(&mut self, peer: Rank) -> Result<(u32, u32)> {
        if let Some(a) = self.addrs.get(peer as usize).copied().flatten() {
            return Ok(a);
        }
        let (_, addr, inst) = address_of(self.pmi.as_mut(), peer)?;
        if let Some(slot) = self.addrs.get_mut(peer as usize) {
            *slot = Some((addr, inst));
        }
        Ok((addr, inst))
    }

    /// Post the wildcard datagram with a fresh spare mailbox.
    pub(super) fn listen(&mut self) -> Result<()> {
        let mbox = self.mboxes.take(&self.nic, &self.rx)?;
        let ep = self.nic.ep_create(Some(&self.tx)).map_err(tr)?;
        ep.post_data_w_id(WILDCARD_ID, &attr_to_bytes(&mbox), 128)
            .map_err(tr)?;
        self.listen = Some(Listen { ep, mbox });
        Ok(())
    }

    /// Start connecting to `peer` unless connected or connecting.
    fn dial(&mut self, peer: Rank) -> Result<()> {
        let p = &self.peers[peer as usize];
        if !p.eps.is_empty() || p.dial.is_some() {
            return Ok(());
        }
        let (addr, inst) = self.address(peer)?;
        let mbox = self.mboxes.take(&self.nic, &self.rx)?;
        let ep = self.nic.ep_create(Some(&self.tx)).map_err(tr)?;
        ep.bind(addr, inst).map_err(tr)?;
        ep.post_data_w_id(DIRECTED | u64::from(peer), &attr_to_bytes(&mbox), 128)
            .map_err(tr)?;
        self.count("dials");
        self.dialing += 1;
        self.peers[peer as usize].dial = Some((ep, mbox));
        Ok(())
    }

    /// A connection to `peer` is up on `ep` (local mailbox `local`, the peer's `remote`).
    fn connected(&mut self, peer: Rank, ep: Ep, local: &SmsgAttr, remote: &[u8]) -> Result<()> {
        let remote = attr_from_bytes(remote).map_err(tr)?;
        ep.smsg_init(local, &remote).map_err(tr)?;
        let eps = &mut self.peers[peer as usize].eps;
        eps.push(ep);
        let duplicate = eps.len() > 1;
        self.count("connections");
        if duplicate {
            self.count("duplicate connections");
        }
        Ok(())
    }

    /// Finished datagram exchanges: this rank's dials, and the wildcard when `wildcard`.
    pub(super) fn poll_datagrams(&mut self, wildcard: bool) -> Result<bool> {
        let mut did = false;
        if self.dialing > 0 {
            for peer in 0..self.size {
                let Some((ep, _)) = &self.peers[peer as usize].dial else {
                    continue;
                };
                let Some(r) = ep.post_data_test().map_err(tr)? else {
                    continue;
                };
                if r.state == PostState::Error && self.dial_retries < DIAL_RETRIES {
                    // The peer's kgni had no room for one more early request (a crowd
                    // dialing one rank): ask again once its listener caught up.
                    self.dial_retries += 1;
                    self.count("dial retries");
                    if let Some((ep, mbox)) = &self.peers[peer as usize].dial {
                        ep.post_data_w_id(DIRECTED | u64::from(peer), &attr_to_bytes(mbox), 128)
                            .map_err(tr)?;
                    }
                    continue;
                }
                let Some((ep, mbox)) = self.peers[peer as usize].dial.take() else {
                    continue;
                };
                self.dialing -= 1;
                if r.state != PostState::Completed {
                    return Err(Error::Transport(format!(
                        "gni: connecting to rank {peer}: datagram {:?}",
                        r.state
                    )));
                }
                self.connected(peer, ep, &mbox, &r.data)?;
                self.flush_backlog(peer)?;
                did = true;
            }
        }
        let Some(l) = self.listen.as_ref().filter(|_| wildcard) else {
            return Ok(did);
        };
        let Some(r) = l.ep.post_data_test().map_err(tr)? else {
            return Ok(did);
        };
        let Some(Listen { ep, mbox }) = self.listen.take() else {
            return Ok(did);
        };
        if r.state != PostState::Completed {
            return Err(Error::Transport(format!(
                "gni: the wildcard datagram: {:?}",
                r.state
            )));
        }
        let peer = r.remote_id;
        if peer >= self.size || peer == self.rank {
            return Err(Error::Transport(format!(
                "gni: a connection from unknown instance {peer}"
            )));
        }
        ep.bind(r.remote_addr, r.remote_id).map_err(tr)?;
        self.count("accepts");
        self.connected(peer, ep, &mbox, &r.data)?;
        self.listen()?;
        self.flush_backlog(peer)?;
        Ok(true)
    }

    /// Send an SMSG message to `dest` (in order behind any backlog; connecting first when
    /// there is no connection yet).
    pub(super) fn smsg(&mut self, dest: Rank, header: &Header, data: &[u8]) -> Result<()> {
        let header = header.encode();
        if dest == self.rank {
            return self.handle(&header, data);
        }
        // Straight into the mailbox when nothing waits before it (no copy of the payload);
        // queued in order otherwise.
        let p = &mut self.peers[dest as usize];
        if p.backlog.is_empty()
            && let Some(ep) = p.eps.first()
        {
            match ep.smsg_send(&header, data, 0) {
                Ok(()) => {
                    self.smsg_out += 1;
                    return Ok(());
                }
                Err(e) if matches!(e.rc(), ReturnCode::NotDone | ReturnCode::ErrorResource) => {}
                Err(e) => return Err(tr(e)),
            }
        }
        let out = Outgoing {
            header,
            data: data.to_vec(),
        };
        self.peers[dest as usize].backlog.push_back(out);
        self.flush_backlog(dest).map(|_| ())
    }

    pub(super) fn flush_backlog(&mut self, dest: Rank) -> Result<bool> {
        let p = &self.peers[dest as usize];
        if p.backlog.is_empty() {
            return Ok(false);
        }
        if p.eps.is_empty() {
            self.dial(dest)?;
            return Ok(false);
        }
        let mut did = false;
        let p = &mut self.peers[dest as usize];
        while let Some(o) = p.backlog.front() {
            match p.eps[0].smsg_send(&o.header, &o.data, 0) {
                Ok(()) => {
                    p.backlog.pop_front();
                    self.smsg_out += 1;
                    did = true;
                }
                // No credits, or every sequence of the FMA descriptor in flight (held by
                // retransmissions while a link is down): the message stays queued and
                // progress sends it once the peer or the NIC catches up.
                Err(e) if matches!(e.rc(), ReturnCode::NotDone | ReturnCode::ErrorResource) => {
                    break;
                }
                Err(e) => return Err(tr(e)),
            }
        }
        Ok(did)
    }

    /// Messages that arrived in the mailboxes.
    pub(super) fn drain_mailboxes(&mut self) -> Result<bool> {
        while let Some(ev) = self.rx.get_event().map_err(tr)? {
            self.rx_seen = true;
            if ev.rc == ReturnCode::ErrorResource {
                self.rx.clear_overrun().map_err(tr)?;
            }
        }
        let mut msgs = Vec::new();
        for ep in self.peers.iter().flat_map(|p| p.eps.iter()) {
            while let Some(m) = ep.smsg_get_next().map_err(tr)? {
                msgs.push(m);
                ep.smsg_release().map_err(tr)?;
            }
        }
        let did = !msgs.is_empty();
        for m in msgs {
            self.handle(m.header(), m.data())?;
        }
        Ok(did)
    }

    /// An endpoint bound to `r` for posts (GET, PUT, AMO): made on first use, no SMSG.
    pub(super) fn post_ep(&mut self, r: Rank) -> Result<&Ep> {
        if r == self.rank {
            return Ok(&self.self_ep);
        }
        let i = r as usize;
        if i >= self.post_eps.len() {
            return Err(Error::Rank {
                rank: i64::from(r),
                size: self.size as usize,
            });
        }
        if self.post_eps[i].is_none() {
            let (addr, inst) = self.address(r)?;
            let ep = self.nic.ep_create(Some(&self.tx)).map_err(tr)?;
            ep.bind(addr, inst).map_err(tr)?;
            self.post_eps[i] = Some(ep);
        }
        self.post_eps[i]
            .as_ref()
            .ok_or_else(|| Error::Transport("gni: no endpoint".into()))
    }
}
