//! The [`Fabric`]: a built topology plus link timing, traffic-class priorities, per-flow FIFO
//! order, fault sites and counters, and how it is configured and read. The way of a packet
//! through it ([`Fabric::inject`]) is in `inject`.

use super::TrafficClass;
use super::capture::CaptureSink;
use super::faults::FaultConfig;
use super::link::{LinkCounters, LinkParams, LinkRetry, LinkState, NUM_PRIORITIES};
use super::topology::{Graph, Hop, LinkId, RouteError, Topology, TopologyError};
use crate::time::SimTime;
use std::sync::Arc;
use thiserror::Error;

/// Why a fabric operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FabricError {
    /// The topology description is invalid.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A route could not be computed.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// A link outside `0..links`.
    #[error("link {0} does not exist")]
    NoSuchLink(u32),
    /// A priority outside `0..NUM_PRIORITIES`.
    #[error("priority {0} is out of range (0..{NUM_PRIORITIES})")]
    BadPriority(u8),
}

/// Everything needed to build a [`Fabric`].
#[derive(Clone, Debug, PartialEq)]
pub struct FabricConfig {
    /// The network shape.
    pub topology: Topology,
    /// Timing of every link.
    pub link: LinkParams,
    /// Fault probabilities.
    pub faults: FaultConfig,
}

impl FabricConfig {
    /// A fault-free configuration with the default link timing.
    pub fn new(topology: Topology) -> Self {
        FabricConfig {
            topology,
            link: LinkParams::default(),
            faults: FaultConfig::none(),
        }
    }
}

/// Fabric-wide counters.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FabricCounters {
    /// Packets handed to [`Fabric::inject`].
    pub injected: u64,
    /// Deliveries returned by [`Fabric::inject`] (duplicates count twice).
    pub delivered: u64,
    /// Packets not delivered at all (sum of the three reasons below).
    pub dropped: u64,
    /// Dropped by the drop fault site.
    pub dropped_fault: u64,
    /// Dropped because a link on their route was down (taken down by
    /// [`Fabric::set_link_up`], or by a link flap, including the packet that flapped it).
    pub dropped_link_down: u64,
    /// Link flaps: a link of a packet's route went down for a window of time.
    pub link_flaps: u64,
    /// Switch ports taken down: the last link of a packet's route went down for a window
    /// of time ([`FaultConfig::port_down`]).
    pub port_downs: u64,
    /// Dropped because the source or destination port does not exist.
    pub dropped_bad_port: u64,
    /// Packets delivered twice.
    pub duplicated: u64,
    /// Deliveries whose data was corrupted (their CRC check fails).
    pub corrupted: u64,
    /// Deliveries held back by the reorder fault site.
    pub reordered: u64,
    /// Payload bytes injected.
    pub bytes_injected: u64,
    /// Link-level retransmissions ([`Fabric::set_link_retry`]), over all links.
    pub link_retries: u64,
    /// Packets lost on a hop (drop site) that the link layer sent again and delivered.
    pub link_recovered_drops: u64,
    /// Packets damaged on a hop (corruption site) that the link layer sent again and
    /// delivered intact.
    pub link_recovered_corruptions: u64,
    /// Packets held by the link layer until a flapped link of their route was up again
    /// (the packet that flapped it included), then delivered.
    pub link_held_for_flap: u64,
}

/// Counters of one traffic class.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TcCounters {
    /// Packets injected with this class.
    pub injected: u64,
    /// Deliveries of this class (duplicates count twice).
    pub delivered: u64,
    /// Packets of this class that were dropped.
    pub dropped: u64,
    /// Payload bytes injected with this class.
    pub bytes: u64,
}
pub(super) type FlowMap = crate::hash::IntMap<(u32, u32, u8), SimTime>;

/// The network: topology, link timing, priorities, faults and counters.
#[derive(Clone, Debug)]
pub struct Fabric {
    pub(super) graph: Graph,
    pub(super) params: LinkParams,
    pub(super) faults: FaultConfig,
    pub(super) links: Vec<LinkState>,
    pub(super) priority: [u8; 256],
    /// Last arrival time per (src, dst, tc) flow, for the FIFO guarantee.
    pub(super) flows: FlowMap,
    pub(super) counters: FabricCounters,
    pub(super) tc: Box<[TcCounters; 256]>,
    pub(super) route: Vec<Hop>,
    pub(super) crc_elision: bool,
    /// Per link: until when it is down after a link flap (up from that time on).
    pub(super) flap_until: Vec<SimTime>,
    /// The capture hook, if one is installed ([`Fabric::set_capture`]).
    pub(super) capture: Option<Arc<dyn CaptureSink>>,
    /// Link-level retry, if the links have it ([`Fabric::set_link_retry`]).
    pub(super) link_retry: Option<LinkRetry>,
}

impl Fabric {
    /// Build a fabric.
    pub fn new(config: FabricConfig) -> Result<Self, FabricError> {
        let graph = config.topology.build()?;
        let graph_links = graph.links().len();
        let mut priority = [0u8; 256];
        for (tc, p) in priority.iter_mut().enumerate() {
            *p = tc.min(NUM_PRIORITIES - 1) as u8;
        }
        Ok(Fabric {
            links: vec![LinkState::default(); graph.links().len()],
            graph,
            params: config.link,
            faults: config.faults,
            priority,
            flows: FlowMap::default(),
            counters: FabricCounters::default(),
            tc: Box::new([TcCounters::default(); 256]),
            route: Vec::new(),
            crc_elision: false,
            flap_until: vec![SimTime::ZERO; graph_links],
            capture: None,
            link_retry: None,
        })
    }

    /// Number of ports (`0..ports` are valid destinations).
    pub fn ports(&self) -> u32 {
        self.graph.ports()
    }
    /// The built topology (links, routes).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    /// The link timing.
    pub fn params(&self) -> &LinkParams {
        &self.params
    }
    /// Change the link timing (affects packets injected from now on).
    pub fn set_params(&mut self, params: LinkParams) {
        self.params = params;
    }
    /// The fault probabilities.
    pub fn faults(&self) -> &FaultConfig {
        &self.faults
    }
    /// Change the fault probabilities (affects packets injected from now on).
    pub fn set_faults(&mut self, faults: FaultConfig) {
        self.faults = faults;
    }
    /// CRC elision: when on, and while no corruption fault is configured, [`Fabric::inject`]
    /// marks packets [`Packet::CRC_TRUSTED`] instead of computing their CRC32 (nothing can
    /// damage them before they are delivered, and the receiver's [`Packet::crc_ok`] then
    /// costs nothing either). With a corruption probability above zero every packet gets
    /// its real CRC, so every corrupted packet is still detected. Off by default (the
    /// deterministic engine folds real CRCs into its trace digest); the threaded engine
    /// turns it on.
    pub fn set_crc_elision(&mut self, on: bool) {
        self.crc_elision = on;
    }
    /// Install (or, with `None`, remove) a capture hook: from now on it sees every packet
    /// handed to [`Fabric::inject`] / [`Fabric::inject_immediate`], as injected (before
    /// routing and the fault sites, dropped ones too), with the virtual time of the
    /// injection. Off by default; when off it costs one test per packet.
    pub fn set_capture(&mut self, sink: Option<Arc<dyn CaptureSink>>) {
        self.capture = sink;
    }
    /// Give every link link-level retry ([`LinkRetry`]), or none (the default). With it, the
    /// drop and corruption fault sites hit a hop of the packet's route, whose link layer
    /// sends the packet again (each retransmission draws the site again, up to
    /// `max_retries`); a packet routed over a link that is down after a flap waits until it
    /// is up when that is within `down_window`. Only what exceeds those bounds is lost or
    /// delivered damaged. Retransmissions delay the packet, and, as a link replays in order,
    /// every later packet of its flow.
    pub fn set_link_retry(&mut self, retry: Option<LinkRetry>) {
        self.link_retry = retry;
    }
    /// The link-level retry of the links, if any.
    pub fn link_retry(&self) -> Option<LinkRetry> {
        self.link_retry
    }
    /// Whether a capture hook is installed.
    pub fn capturing(&self) -> bool {
        self.capture.is_some()
    }
    /// Whether CRC elision is on ([`Fabric::set_crc_elision`]).
    pub fn crc_elision(&self) -> bool {
        self.crc_elision
    }
    /// The priority of a traffic class (0 is the highest). By default class `n` has priority
    /// `min(n, NUM_PRIORITIES - 1)`, so Cassini's DEDICATED_ACCESS (0) and LOW_LATENCY (1)
    /// classes are served before BULK_DATA (2) and BEST_EFFORT (3) (cxi_traffic_class in
    /// libcxi's cxi-abi).
    pub fn priority(&self, tc: TrafficClass) -> u8 {
        self.priority[usize::from(tc.0)]
    }
    /// Map a traffic class to a priority.
    pub fn set_priority(&mut self, tc: TrafficClass, priority: u8) -> Result<(), FabricError> {
        if usize::from(priority) >= NUM_PRIORITIES {
            return Err(FabricError::BadPriority(priority));
        }
        self.priority[usize::from(tc.0)] = priority;
        Ok(())
    }
    /// Take a link down (every packet routed over it is dropped until it is up again) or
    /// bring it back up. Packets already in flight are not affected.
    pub fn set_link_up(&mut self, link: LinkId, up: bool) -> Result<(), FabricError> {
        let l = self
            .links
            .get_mut(link.0 as usize)
            .ok_or(FabricError::NoSuchLink(link.0))?;
        l.up = up;
        Ok(())
    }
    /// Whether a link is up (false for a link that does not exist). A link down after a link
    /// flap is still up here (see [`Fabric::link_flapped_until`]).
    pub fn link_is_up(&self, link: LinkId) -> bool {
        self.links.get(link.0 as usize).is_some_and(|l| l.up)
    }
    /// Until when a link is down after a link flap (`None` if it never flapped or does not
    /// exist). It carries traffic again from that time on.
    pub fn link_flapped_until(&self, link: LinkId) -> Option<SimTime> {
        self.flap_until
            .get(link.0 as usize)
            .copied()
            .filter(|&t| t > SimTime::ZERO)
    }
    /// Fabric-wide counters.
    pub fn counters(&self) -> FabricCounters {
        self.counters
    }
    /// Counters of one link.
    pub fn link_counters(&self, link: LinkId) -> Option<LinkCounters> {
        self.links.get(link.0 as usize).map(|l| l.counters)
    }
    /// Counters of one traffic class.
    pub fn tc_counters(&self, tc: TrafficClass) -> TcCounters {
        self.tc[usize::from(tc.0)]
    }
}
