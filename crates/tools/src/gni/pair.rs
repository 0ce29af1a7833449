//! The emulated pair the tools run over: node 0 is the client (it initiates), node 1 the
//! server. Each side has a CDM attached to its NIC, a CQ for local events, a CQ for remote
//! events, a data buffer (registered without a remote CQ: RMA into it is silent) and an SMSG
//! mailbox (registered with the remote CQ); the two connect through kgni datagrams.

use std::sync::Arc;

use driver::mem::UserMemory;
use firmware_spec::gemini::gni::{CdmMode, CqEventType, CqMode, MemFlags, ReturnCode};
use firmware_spec::gemini::mdd::MemHandle;
use platform::EngineKind;
use platform::gemini::GeminiCluster;

use super::{OP_TIMEOUT, ToolError, ToolResult};
use userlib::gni::smsg::{ATTR_WIRE_SIZE, attr_from_bytes, attr_to_bytes, mailbox_attr};
use userlib::gni::{Cdm, Cq, Ep, Nic, cq};

/// Id of the server's listening datagram.
const LISTEN_ID: u64 = 0x6e69_6365;

/// One side.
pub(crate) struct Side {
    pub(crate) ep: Ep,
    pub(crate) tx: Cq,
    pub(crate) rx: Cq,
    pub(crate) buf: UserMemory,
    pub(crate) mh: MemHandle,
    _mbox: UserMemory,
    pub(crate) nic: Nic,
    _cdm: Cdm,
    pub(crate) pe: u32,
    pub(crate) inst: u32,
}

/// What a side tells its peer in the connection datagram: its mailbox, its data buffer.
fn hello(s: &Side, mbox: &userlib::gni::SmsgAttr) -> Vec<u8> {
    let mut v = attr_to_bytes(mbox).to_vec();
    v.extend_from_slice(&s.buf.va().to_le_bytes());
    v.extend_from_slice(&s.mh.to_bytes());
    v
}

fn parse_hello(b: &[u8]) -> ToolResult<(userlib::gni::SmsgAttr, u64, MemHandle)> {
    let attr = attr_from_bytes(b)?;
    let rest = b
        .get(ATTR_WIRE_SIZE..ATTR_WIRE_SIZE + 24)
        .ok_or_else(|| ToolError::Option("short connection datagram".into()))?;
    let mut va = [0u8; 8];
    va.copy_from_slice(&rest[..8]);
    let mh = MemHandle::from_bytes(&rest[8..])
        .map_err(|_| ToolError::Option("bad memory handle in connection datagram".into()))?;
    Ok((attr, u64::from_le_bytes(va), mh))
}

impl Side {
    fn new(
        cluster: &GeminiCluster,
        node: usize,
        inst: u32,
        buf_len: u64,
        mbox_len: u64,
        cq_entries: u32,
        mode: CdmMode,
    ) -> ToolResult<Side> {
        let job = cluster.job().clone();
        let client = Arc::new(
            cluster
                .node(node)
                .ok_or_else(|| ToolError::Option(format!("no node {node}")))?
                .open(),
        );
        let cdm = Cdm::create(&client, inst, job.ptag, job.cookie, mode)?;
        let nic = cdm.attach(-1)?;
        let tx = nic.cq_create(cq_entries, 1, CqMode::NOBLOCK)?;
        let rx = nic.cq_create(cq_entries, 1, CqMode::NOBLOCK)?;
        let mem = |len: u64| {
            nic.space()
                .alloc(len)
                .map_err(|e| ToolError::Option(format!("cannot allocate {len} bytes: {e}")))
        };
        let buf = mem(buf_len)?;
        let mh = nic.mem_register(buf.va(), buf.len(), None, MemFlags::READWRITE)?;
        let mbox = mem(mbox_len)?;
        let ep = nic.ep_create(Some(&tx))?;
        Ok(Side {
            ep,
            tx,
            rx,
            buf,
            mh,
            _mbox: mbox,
            nic,
            _cdm: cdm,
            pe: node as u32,
            inst,
        })
    }

    /// Take every event of the local CQ: POST events complete their descriptor
    /// (`GetCompleted`), SMSG events are send completions. Returns how many.
    pub(crate) fn consume(&self) -> ToolResult<u64> {
        let mut n = 0;
        while let Some(ev) = self.tx.get_event()? {
            check(&ev, "an operation")?;
            if cq::get_type(&ev.cqe) == Some(CqEventType::Post) {
                let done = self.tx.get_completed(&ev.cqe)?;
                if done.rc != ReturnCode::Success {
                    return Err(ToolError::Completion {
                        op: "a post",
                        rc: done.rc,
                        detail: done.error_str(&ev.cqe),
                    });
                }
            }
            n += 1;
        }
        Ok(n)
    }

    /// Take the next local event, waiting for it.
    pub(crate) fn wait_one(&self, op: &'static str) -> ToolResult<()> {
        let ev = self.tx.poll_event(OP_TIMEOUT)?;
        check(&ev, op)?;
        if cq::get_type(&ev.cqe) == Some(CqEventType::Post) {
            self.tx.get_completed(&ev.cqe)?;
        }
        Ok(())
    }

    /// Drop the remote events (messages and back credits are found in the mailbox).
    pub(crate) fn drain_remote(&self) -> ToolResult<()> {
        while let Some(ev) = self.rx.get_event()? {
            if ev.rc == ReturnCode::ErrorResource {
                self.rx.clear_overrun()?;
            }
        }
        Ok(())
    }

    /// Take and release every message that has arrived; returns how many.
    pub(crate) fn drain_messages(&self) -> ToolResult<u64> {
        let mut n = 0;
        self.drain_remote()?;
        while self.ep.smsg_get_next()?.is_some() {
            self.ep.smsg_release()?;
            n += 1;
        }
        Ok(n)
    }
}

fn check(ev: &userlib::gni::CqEvent, op: &'static str) -> ToolResult<()> {
    if ev.rc != ReturnCode::Success {
        return Err(ToolError::Completion {
            op,
            rc: ev.rc,
            detail: cq::error_str(&ev.cqe),
        });
    }
    Ok(())
}

/// SMSG parameters of the pair.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SmsgParams {
    pub(crate) credits: u16,
    pub(crate) maxsize: u32,
}

/// Client, server and the cluster under them (dropped last).
pub(crate) struct Pair {
    pub(crate) client: Side,
    pub(crate) server: Side,
    /// The server's data buffer as the client addresses it.
    pub(crate) remote_va: u64,
    pub(crate) remote_mh: MemHandle,
    pub(crate) smsg: SmsgParams,
    pub(crate) job: (u8, u32),
    /// Last: the engine shuts down after every object above was freed.
    _cluster: GeminiCluster,
}

impl Pair {
    /// Build the pair on `engine` with data buffers of `buf_len` bytes, connect it, and
    /// start SMSG with `smsg`. Both sides' communication domains are created with `mode`
    /// (`GNI_CDM_MODE_CACHED_AMO_ENABLED` for the `_C` AMOs).
    pub(crate) fn new(
        engine: &EngineKind,
        buf_len: u64,
        smsg: SmsgParams,
        cq_entries: u32,
        mode: CdmMode,
    ) -> ToolResult<Pair> {
        let probe = mailbox_attr(0, 0, MemHandle::default(), smsg.credits, smsg.maxsize)?;
        let mbox_len = u64::from(probe.buff_size);
        let memory = (2 * (buf_len + mbox_len) + (64 << 20))
            .max(128 << 20)
            .next_multiple_of(1 << 20);
        let cluster = GeminiCluster::builder()
            .engine(engine.clone())
            .memory_per_node(memory)
            .build()?;
        let client = Side::new(&cluster, 0, 0, buf_len, mbox_len, cq_entries, mode)?;
        let server = Side::new(&cluster, 1, 1, buf_len, mbox_len, cq_entries, mode)?;
        let mailbox = |s: &Side| -> ToolResult<userlib::gni::SmsgAttr> {
            let mh = s.nic.mem_register(
                s._mbox.va(),
                s._mbox.len(),
                Some(&s.rx),
                MemFlags::READWRITE,
            )?;
            Ok(mailbox_attr(
                s._mbox.va(),
                0,
                mh,
                smsg.credits,
                smsg.maxsize,
            )?)
        };
        let (cm, sm) = (mailbox(&client)?, mailbox(&server)?);
        // The server listens; the client knows where the server is.
        server
            .ep
            .post_data_w_id(LISTEN_ID, &hello(&server, &sm), 128)?;
        client.ep.bind(server.pe, server.inst)?;
        client.ep.post_data(&hello(&client, &cm), 128)?;
        let answer = client.ep.post_data_wait(OP_TIMEOUT)?;
        let (their_mbox, remote_va, remote_mh) = parse_hello(&answer.data)?;
        let heard = server.nic.post_data_wait_by_id(LISTEN_ID, OP_TIMEOUT)?;
        let (client_mbox, _, _) = parse_hello(&heard.data)?;
        server.ep.bind(heard.remote_addr, heard.remote_id)?;
        client.ep.smsg_init(&cm, &their_mbox)?;
        server.ep.smsg_init(&sm, &client_mbox)?;
        let job = (cluster.job().ptag, cluster.job().cookie);
        Ok(Pair {
            client,
            server,
            remote_va,
            remote_mh,
            smsg,
            job,
            _cluster: cluster,
        })
    }

    /// Let the client's and server's software catch up: server messages taken and
    /// released, client remote events dropped, one unit of device progress.
    pub(crate) fn service(&self) -> ToolResult<()> {
        self.server.drain_messages()?;
        self.client.drain_remote()?;
        self.client.nic.progress();
        Ok(())
    }

    /// [`Pair::service`] for a streaming sender (out of credits, or at the end of a list):
    /// the unit of device progress
    /// (on the threaded engine a yield of the CPU when nothing is due) is skipped when the
    /// server took messages, since releasing them returned credits and the sender can go
    /// on at once (a loaded host would otherwise take the CPU away once per mailbox).
    pub(crate) fn service_stalled(&self) -> ToolResult<()> {
        let taken = self.server.drain_messages()?;
        self.client.drain_remote()?;
        if taken == 0 {
            self.client.nic.progress();
        }
        Ok(())
    }
}
