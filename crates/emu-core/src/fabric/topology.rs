//! Topologies and their routes.
//!
//! A [`Topology`] is a description (a few numbers); [`Topology::build`] turns it into a
//! [`Graph`]: the nodes (ports and switches), the links between them, and a deterministic
//! routing function. Every link is full duplex; a route is a list of [`Hop`]s, each naming a
//! link and the direction it is crossed in.
//!
//! Link numbering is stable and documented per topology so that tests and fault campaigns can
//! name a link (e.g. to take it down):
//! - The first `ports` links are the edge links: link `i` is the cable of port `i` (its
//!   [`Dir::Forward`] direction goes from the port into the network). The exception is
//!   [`Topology::PointToPoint`], whose only link (0) joins port 0 (end `a`) to port 1 (end `b`).
//! - Then the switch-to-switch links, in the order given on each variant.

use super::PortId;
use thiserror::Error;

/// A network shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topology {
    /// Two ports joined by one cable (back-to-back NICs, no switch). Link 0: port 0 -> port 1
    /// is [`Dir::Forward`].
    PointToPoint,
    /// One switch with `ports` ports. Links `0..ports` are the edge links.
    SingleSwitch {
        /// Number of endpoints.
        ports: u32,
    },
    /// A dragonfly, the Slingshot topology: `groups` groups of `switches_per_group` switches;
    /// the switches of a group are connected all-to-all by local links, and every pair of
    /// groups by exactly one global link; each switch has `ports_per_switch` endpoints.
    /// Routing is minimal: local hop (if needed) to the switch holding the global link to the
    /// destination group, the global hop, local hop (if needed) to the destination switch.
    ///
    /// Numbering: port `p` sits on switch `p / ports_per_switch`; switch `s` is in group
    /// `s / switches_per_group`. The global link between groups `i` and `j` leaves group `i`
    /// from its switch `peer(i, j) % switches_per_group`, where `peer(i, j)` is `j`'s position
    /// in the list of `i`'s peer groups (`j` if `j < i`, else `j - 1`), and symmetrically
    /// enters group `j` at its switch `peer(j, i) % switches_per_group`.
    /// Links after the edge links: all local links (group by group, pairs `(s, t)`, `s < t`, in
    /// lexicographic order), then all global links (pairs of groups `(i, j)`, `i < j`, in
    /// lexicographic order).
    Dragonfly {
        /// Number of groups.
        groups: u32,
        /// Switches in each group.
        switches_per_group: u32,
        /// Endpoints on each switch.
        ports_per_switch: u32,
    },
    /// A 3D torus of routers, the Gemini topology: one router per coordinate, shared by
    /// `nics_per_router` NICs (2 on Gemini: one ASIC holds two NICs and one router; see
    /// docs/emu-core-engines.md). Routing is dimension order (x, then y, then z), taking the
    /// shorter way around each ring; a tie (exactly half way round) goes in the + direction.
    ///
    /// Numbering: router `r = x + X * (y + Y * z)`; port `p` is on router
    /// `p / nics_per_router`. Links after the edge links: for each dimension `d` (x, y, z), for
    /// each router `r` in index order, the link from `r` to its + neighbour in `d`. A
    /// dimension of size 1 has no links; of size 2, one link per pair (created at coordinate
    /// 0); of size >= 3, a ring (wraparound) of `size` links.
    Torus3D {
        /// Routers along x, y and z.
        dims: [u32; 3],
        /// NICs attached to each router (2 for Gemini).
        nics_per_router: u32,
    },
}

/// Why a topology cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TopologyError {
    /// A size parameter is zero.
    #[error("topology parameter `{0}` must be at least 1")]
    Zero(&'static str),
    /// The topology has more ports, switches or links than fit in 32 bits.
    #[error("topology is too large")]
    TooLarge,
}

/// Why a route could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RouteError {
    /// A port outside `0..ports`.
    #[error("port {port} does not exist (the fabric has {ports} ports)")]
    NoSuchPort {
        /// The offending port.
        port: u32,
        /// Number of ports in the topology.
        ports: u32,
    },
}

/// A link of the fabric (dense: `0..links`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);

/// The direction a link is crossed in: `Forward` goes from end `a` to end `b`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    /// From end `a` to end `b`.
    Forward,
    /// From end `b` to end `a`.
    Reverse,
}

impl Dir {
    /// 0 for `Forward`, 1 for `Reverse` (an index into per-direction state).
    pub const fn index(self) -> usize {
        match self {
            Dir::Forward => 0,
            Dir::Reverse => 1,
        }
    }
    /// The opposite direction.
    pub const fn flip(self) -> Dir {
        match self {
            Dir::Forward => Dir::Reverse,
            Dir::Reverse => Dir::Forward,
        }
    }
}

/// One step of a route.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Hop {
    /// The link crossed.
    pub link: LinkId,
    /// The direction it is crossed in.
    pub dir: Dir,
}

/// A node of the graph.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// An endpoint (NIC port).
    Port(PortId),
    /// A switch (dragonfly, single switch) or router (torus).
    Switch(u32),
}

/// What a link is, for counters and fault campaigns.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// Port to port (point-to-point cable).
    Cable,
    /// Port to its switch/router.
    Edge,
    /// Switch to switch inside a dragonfly group.
    Local,
    /// Switch to switch between dragonfly groups.
    Global,
    /// Router to router along a torus dimension (0 = x, 1 = y, 2 = z).
    Torus(u8),
}

/// The two ends of a link and its kind.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct LinkEnds {
    /// End `a` ([`Dir::Forward`] leaves from here).
    pub a: Node,
    /// End `b`.
    pub b: Node,
    /// What the link is.
    pub kind: LinkKind,
}

#[derive(Clone, Debug)]
enum Shape {
    PointToPoint,
    SingleSwitch,
    Dragonfly {
        groups: u32,
        spg: u32,
        pps: u32,
        local_base: u32,
        global_base: u32,
    },
    Torus {
        dims: [u32; 3],
        npr: u32,
        /// `plus[d][r]`: the hop from router `r` to its + neighbour along `d` (None if the
        /// dimension has size 1).
        plus: [Vec<Option<Hop>>; 3],
    },
}

/// A built topology: nodes, links and routing.
#[derive(Clone, Debug)]
pub struct Graph {
    ports: u32,
    switches: u32,
    links: Vec<LinkEnds>,
    shape: Shape,
}

fn nonzero(v: u32, name: &'static str) -> Result<u32, TopologyError> {
    if v == 0 {
        Err(TopologyError::Zero(name))
    } else {
        Ok(v)
    }
}

fn mul(a: u32, b: u32) -> Result<u32, TopologyError> {
    a.checked_mul(b).ok_or(TopologyError::TooLarge)
}

/// Index of the unordered pair `(s, t)`, `s < t < n`, in lexicographic order.
fn pair_index(s: u32, t: u32, n: u32) -> u64 {
    let (s, t, n) = (u64::from(s), u64::from(t), u64::from(n));
    s * n - s * (s + 1) / 2 + (t - s - 1)
}

/// Position of group `j` in the list of group `i`'s peers (all groups but `i`).
fn peer(i: u32, j: u32) -> u32 {
    if j < i { j } else { j - 1 }
}

fn edge_links(ports: u32, ports_per_switch: u32) -> Vec<LinkEnds> {
    (0..ports)
        .map(|p| LinkEnds {
            a: Node::Port(PortId(p)),
            b: Node::Switch(p / ports_per_switch),
            kind: LinkKind::Edge,
        })
        .collect()
}

impl Topology {
    /// Number of endpoints, or an error if the description is invalid.
    pub fn ports(&self) -> Result<u32, TopologyError> {
        match *self {
            Topology::PointToPoint => Ok(2),
            Topology::SingleSwitch { ports } => nonzero(ports, "ports"),
            Topology::Dragonfly {
                groups,
                switches_per_group,
                ports_per_switch,
            } => mul(
                mul(
                    nonzero(groups, "groups")?,
                    nonzero(switches_per_group, "switches_per_group")?,
                )?,
                nonzero(ports_per_switch, "ports_per_switch")?,
            ),
            Topology::Torus3D {
                dims,
                nics_per_router,
            } => mul(
                mul(
                    mul(nonzero(dims[0], "dims[0]")?, nonzero(dims[1], "dims[1]")?)?,
                    nonzero(dims[2], "dims[2]")?,
                )?,
                nonzero(nics_per_router, "nics_per_router")?,
            ),
        }
    }

    /// Build the graph: nodes, links, routing tables.
    pub fn build(&self) -> Result<Graph, TopologyError> {
        let ports = self.ports()?;
        match *self {
            Topology::PointToPoint => Ok(Graph {
                ports,
                switches: 0,
                links: vec![LinkEnds {
                    a: Node::Port(PortId(0)),
                    b: Node::Port(PortId(1)),
                    kind: LinkKind::Cable,
                }],
                shape: Shape::PointToPoint,
            }),
            Topology::SingleSwitch { .. } => Ok(Graph {
                ports,
                switches: 1,
                links: edge_links(ports, ports),
                shape: Shape::SingleSwitch,
            }),
            Topology::Dragonfly {
                groups,
                switches_per_group: spg,
                ports_per_switch: pps,
            } => {
                let switches = mul(groups, spg)?;
                let mut links = edge_links(ports, pps);
                let local_base = ports;
                for g in 0..groups {
                    for s in 0..spg {
                        for t in s + 1..spg {
                            links.push(LinkEnds {
                                a: Node::Switch(g * spg + s),
                                b: Node::Switch(g * spg + t),
                                kind: LinkKind::Local,
                            });
                        }
                    }
                }
                let global_base =
                    u32::try_from(links.len()).map_err(|_| TopologyError::TooLarge)?;
                for i in 0..groups {
                    for j in i + 1..groups {
                        links.push(LinkEnds {
                            a: Node::Switch(i * spg + peer(i, j) % spg),
                            b: Node::Switch(j * spg + peer(j, i) % spg),
                            kind: LinkKind::Global,
                        });
                    }
                }
                u32::try_from(links.len()).map_err(|_| TopologyError::TooLarge)?;
                Ok(Graph {
                    ports,
                    switches,
                    links,
                    shape: Shape::Dragonfly {
                        groups,
                        spg,
                        pps,
                        local_base,
                        global_base,
                    },
                })
            }
            Topology::Torus3D {
                dims,
                nics_per_router: npr,
            } => {
                let routers = ports / npr;
                let mut links = edge_links(ports, npr);
                let mut plus: [Vec<Option<Hop>>; 3] = Default::default();
                for (d, plus_d) in plus.iter_mut().enumerate() {
                    *plus_d = vec![None; routers as usize];
                    let size = dims[d];
                    if size == 1 {
                        continue;
                    }
                    for r in 0..routers {
                        let mut c = coords(r, dims);
                        if size == 2 && c[d] == 1 {
                            continue; // the pair's link is created at coordinate 0
                        }
                        c[d] = (c[d] + 1) % size;
                        let nb = router_index(c, dims);
                        let id = u32::try_from(links.len()).map_err(|_| TopologyError::TooLarge)?;
                        links.push(LinkEnds {
                            a: Node::Switch(r),
                            b: Node::Switch(nb),
                            kind: LinkKind::Torus(d as u8),
                        });
                        plus_d[r as usize] = Some(Hop {
                            link: LinkId(id),
                            dir: Dir::Forward,
                        });
                        if size == 2 {
                            // From coordinate 1 the + neighbour is coordinate 0: same cable.
                            plus_d[nb as usize] = Some(Hop {
                                link: LinkId(id),
                                dir: Dir::Reverse,
                            });
                        }
                    }
                }
                Ok(Graph {
                    ports,
                    switches: routers,
                    links,
                    shape: Shape::Torus { dims, npr, plus },
                })
            }
        }
    }
}

fn coords(r: u32, dims: [u32; 3]) -> [u32; 3] {
    [
        r % dims[0],
        (r / dims[0]) % dims[1],
        r / (dims[0] * dims[1]),
    ]
}

fn router_index(c: [u32; 3], dims: [u32; 3]) -> u32 {
    c[0] + dims[0] * (c[1] + dims[1] * c[2])
}

impl Graph {
    /// Number of endpoints (`0..ports` are valid [`PortId`]s).
    pub fn ports(&self) -> u32 {
        self.ports
    }
    /// Number of switches (routers for a torus).
    pub fn switches(&self) -> u32 {
        self.switches
    }
    /// All links, indexed by [`LinkId`].
    pub fn links(&self) -> &[LinkEnds] {
        &self.links
    }
    /// The edge link (or cable) of a port.
    pub fn port_link(&self, port: PortId) -> Option<LinkId> {
        if port.0 >= self.ports {
            None
        } else if matches!(self.shape, Shape::PointToPoint) {
            Some(LinkId(0))
        } else {
            Some(LinkId(port.0))
        }
    }
    /// The switch or router a port is attached to (None for point-to-point).
    pub fn switch_of(&self, port: PortId) -> Option<u32> {
        if port.0 >= self.ports {
            return None;
        }
        match &self.shape {
            Shape::PointToPoint => None,
            Shape::SingleSwitch => Some(0),
            Shape::Dragonfly { pps, .. } => Some(port.0 / pps),
            Shape::Torus { npr, .. } => Some(port.0 / npr),
        }
    }
    /// Torus coordinates of a port's router (None for other topologies).
    pub fn torus_coords(&self, port: PortId) -> Option<[u32; 3]> {
        match &self.shape {
            Shape::Torus { dims, npr, .. } if port.0 < self.ports => {
                Some(coords(port.0 / npr, *dims))
            }
            _ => None,
        }
    }

    fn check(&self, p: PortId) -> Result<(), RouteError> {
        if p.0 < self.ports {
            Ok(())
        } else {
            Err(RouteError::NoSuchPort {
                port: p.0,
                ports: self.ports,
            })
        }
    }

    /// The route from `src` to `dst`, written into `out` (cleared first). Deterministic: the
    /// same pair always takes the same route. A packet to itself goes up to the switch and
    /// back (two hops over the port's own edge link); point-to-point loopback uses no link.
    pub fn route_into(
        &self,
        src: PortId,
        dst: PortId,
        out: &mut Vec<Hop>,
    ) -> Result<(), RouteError> {
        self.check(src)?;
        self.check(dst)?;
        out.clear();
        let up = |p: PortId| Hop {
            link: LinkId(p.0),
            dir: Dir::Forward,
        };
        let down = |p: PortId| Hop {
            link: LinkId(p.0),
            dir: Dir::Reverse,
        };
        match &self.shape {
            Shape::PointToPoint => {
                if src != dst {
                    out.push(Hop {
                        link: LinkId(0),
                        dir: if src.0 == 0 {
                            Dir::Forward
                        } else {
                            Dir::Reverse
                        },
                    });
                }
            }
            Shape::SingleSwitch => {
                out.push(up(src));
                out.push(down(dst));
            }
            Shape::Dragonfly {
                groups,
                spg,
                pps,
                local_base,
                global_base,
            } => {
                let (spg, pps) = (*spg, *pps);
                let (ss, sd) = (src.0 / pps, dst.0 / pps);
                let (gs, gd) = (ss / spg, sd / spg);
                let local = |g: u32, a: u32, b: u32| -> Hop {
                    // a, b: switch indices within group g, a != b
                    let (s, t, dir) = if a < b {
                        (a, b, Dir::Forward)
                    } else {
                        (b, a, Dir::Reverse)
                    };
                    let per_group = u64::from(spg) * u64::from(spg - 1) / 2;
                    let id =
                        u64::from(*local_base) + u64::from(g) * per_group + pair_index(s, t, spg);
                    Hop {
                        link: LinkId(id as u32),
                        dir,
                    }
                };
                out.push(up(src));
                if gs == gd {
                    if ss != sd {
                        out.push(local(gs, ss % spg, sd % spg));
                    }
                } else {
                    let (i, j, dir) = if gs < gd {
                        (gs, gd, Dir::Forward)
                    } else {
                        (gd, gs, Dir::Reverse)
                    };
                    let gid = u64::from(*global_base) + pair_index(i, j, *groups);
                    let exit = peer(gs, gd) % spg;
                    let entry = peer(gd, gs) % spg;
                    if ss % spg != exit {
                        out.push(local(gs, ss % spg, exit));
                    }
                    out.push(Hop {
                        link: LinkId(gid as u32),
                        dir,
                    });
                    if entry != sd % spg {
                        out.push(local(gd, entry, sd % spg));
                    }
                }
                out.push(down(dst));
            }
            Shape::Torus { dims, npr, plus } => {
                out.push(up(src));
                let mut cur = coords(src.0 / npr, *dims);
                let target = coords(dst.0 / npr, *dims);
                for d in 0..3 {
                    let size = dims[d];
                    while cur[d] != target[d] {
                        let fwd = (target[d] + size - cur[d]) % size;
                        let r = router_index(cur, *dims) as usize;
                        if fwd <= size - fwd {
                            if let Some(h) = plus[d][r] {
                                out.push(h);
                            }
                            cur[d] = (cur[d] + 1) % size;
                        } else {
                            let mut prev = cur;
                            prev[d] = (cur[d] + size - 1) % size;
                            let pr = router_index(prev, *dims) as usize;
                            if let Some(h) = plus[d][pr] {
                                out.push(Hop {
                                    link: h.link,
                                    dir: h.dir.flip(),
                                });
                            }
                            cur = prev;
                        }
                    }
                }
                out.push(down(dst));
            }
        }
        Ok(())
    }

    /// The route from `src` to `dst` as a new vector (see [`Graph::route_into`]).
    pub fn route(&self, src: PortId, dst: PortId) -> Result<Vec<Hop>, RouteError> {
        let mut v = Vec::new();
        self.route_into(src, dst, &mut v)?;
        Ok(v)
    }

    /// The node a hop arrives at.
    pub fn hop_target(&self, hop: Hop) -> Option<Node> {
        let l = self.links.get(hop.link.0 as usize)?;
        Some(match hop.dir {
            Dir::Forward => l.b,
            Dir::Reverse => l.a,
        })
    }

    /// The node a hop leaves from.
    pub fn hop_source(&self, hop: Hop) -> Option<Node> {
        let l = self.links.get(hop.link.0 as usize)?;
        Some(match hop.dir {
            Dir::Forward => l.a,
            Dir::Reverse => l.b,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Check that a route is a connected walk from src to dst.
    fn assert_walk(g: &Graph, src: u32, dst: u32) -> usize {
        let r = g.route(PortId(src), PortId(dst)).unwrap();
        let mut at = Node::Port(PortId(src));
        for h in &r {
            assert_eq!(g.hop_source(*h), Some(at), "route {src}->{dst}: {r:?}");
            at = g.hop_target(*h).unwrap();
        }
        if src != dst || !r.is_empty() {
            assert_eq!(at, Node::Port(PortId(dst)));
        }
        r.len()
    }

    #[test]
    fn single_switch_routes_are_two_hops() {
        let g = Topology::SingleSwitch { ports: 4 }.build().unwrap();
        assert_eq!(g.links().len(), 4);
        for s in 0..4 {
            for d in 0..4 {
                assert_eq!(assert_walk(&g, s, d), 2);
            }
        }
    }

    #[test]
    fn point_to_point_is_one_link() {
        let g = Topology::PointToPoint.build().unwrap();
        assert_eq!(assert_walk(&g, 0, 1), 1);
        assert_eq!(assert_walk(&g, 1, 0), 1);
        assert_eq!(g.route(PortId(0), PortId(0)).unwrap().len(), 0);
    }

    #[test]
    fn every_route_is_a_walk() {
        for topo in [
            Topology::Dragonfly {
                groups: 4,
                switches_per_group: 3,
                ports_per_switch: 2,
            },
            Topology::Dragonfly {
                groups: 9,
                switches_per_group: 2,
                ports_per_switch: 1,
            },
            Topology::Torus3D {
                dims: [3, 2, 4],
                nics_per_router: 2,
            },
            Topology::Torus3D {
                dims: [1, 5, 2],
                nics_per_router: 1,
            },
        ] {
            let g = topo.build().unwrap();
            for s in 0..g.ports() {
                for d in 0..g.ports() {
                    assert_walk(&g, s, d);
                }
            }
        }
    }

    #[test]
    fn bad_ports_and_sizes_are_errors() {
        let g = Topology::SingleSwitch { ports: 2 }.build().unwrap();
        assert_eq!(
            g.route(PortId(0), PortId(2)),
            Err(RouteError::NoSuchPort { port: 2, ports: 2 })
        );
        assert_eq!(
            Topology::SingleSwitch { ports: 0 }.build().err(),
            Some(TopologyError::Zero("ports"))
        );
        assert_eq!(
            Topology::Torus3D {
                dims: [65536, 65536, 2],
                nics_per_router: 2
            }
            .ports(),
            Err(TopologyError::TooLarge)
        );
    }
}
