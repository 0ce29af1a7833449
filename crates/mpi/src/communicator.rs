//! Communicators and groups: who the ranks of a communication context are, and the context id
//! that keeps its messages apart from every other communicator's (MPI 4.1 ch. 7).

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::datatype::vec_from_bytes;
use crate::progress::CoreRef;
use transport::error::{Error, Result};
use transport::{MatchBits, Rank};

/// A rank within a communicator (`int` in MPI).
pub type CommRank = i32;
/// A message tag.
pub type Tag = i32;

/// The largest tag (`MPI_TAG_UB`).
pub const TAG_UB: Tag = i32::MAX;
/// `MPI_ANY_TAG` where a tag is an `Option`: `None`.
pub const ANY_TAG: Option<Tag> = None;
/// `MPI_UNDEFINED`, as a color of [`SimpleCommunicator::split_by_color`]: `None`.
pub const UNDEFINED: Option<i32> = None;

/// How two communicators relate (`MPI_Comm_compare`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommunicatorRelation {
    /// `MPI_IDENT`: the same communicator.
    Identical,
    /// `MPI_CONGRUENT`: same ranks in the same order, another context.
    Congruent,
    /// `MPI_SIMILAR`: same ranks, another order.
    Similar,
    /// `MPI_UNEQUAL`.
    Unequal,
}

/// An ordered set of processes (`MPI_Group`), by world rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    members: Vec<Rank>,
    me: Rank,
}

impl Group {
    /// Its size.
    pub fn size(&self) -> CommRank {
        self.members.len() as CommRank
    }

    /// This process's rank in the group, if it is a member.
    pub fn rank(&self) -> Option<CommRank> {
        self.members
            .iter()
            .position(|&w| w == self.me)
            .map(|r| r as CommRank)
    }

    /// The group of the listed ranks, in that order (`MPI_Group_incl`).
    pub fn include(&self, ranks: &[CommRank]) -> Result<Group> {
        let members = ranks
            .iter()
            .map(|&r| self.world_rank(r))
            .collect::<Result<Vec<_>>>()?;
        Ok(Group {
            members,
            me: self.me,
        })
    }

    /// The group without the listed ranks (`MPI_Group_excl`).
    pub fn exclude(&self, ranks: &[CommRank]) -> Result<Group> {
        for &r in ranks {
            self.world_rank(r)?;
        }
        let members = (0..self.size())
            .filter(|r| !ranks.contains(r))
            .map(|r| self.members[r as usize])
            .collect();
        Ok(Group {
            members,
            me: self.me,
        })
    }

    /// The rank in `other` of rank `r` of this group (`MPI_Group_translate_ranks`).
    pub fn translate_rank(&self, r: CommRank, other: &Group) -> Result<Option<CommRank>> {
        let w = self.world_rank(r)?;
        Ok(other
            .members
            .iter()
            .position(|&x| x == w)
            .map(|p| p as CommRank))
    }

    fn world_rank(&self, r: CommRank) -> Result<Rank> {
        usize::try_from(r)
            .ok()
            .and_then(|i| self.members.get(i).copied())
            .ok_or(Error::Rank {
                rank: i64::from(r),
                size: self.members.len(),
            })
    }
}

/// A communicator (`MPI_Comm`): a group, this process's rank in it, and a context id. Cloning
/// gives another handle on the same communicator (as copying an `MPI_Comm` does); use
/// [`duplicate`](Self::duplicate) for a new context.
#[derive(Clone)]
pub struct SimpleCommunicator {
    pub(crate) core: CoreRef,
    members: Rc<Vec<Rank>>,
    index: Rc<HashMap<Rank, CommRank>>,
    rank: CommRank,
    /// Context of point-to-point traffic; collectives use `context + 1`.
    context: u16,
    /// The sequence number of the next collective call, shared by every handle on this
    /// communicator (it goes into the collective's tags).
    coll_seq: Rc<Cell<u32>>,
}

impl std::fmt::Debug for SimpleCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleCommunicator")
            .field("rank", &self.rank)
            .field("size", &self.members.len())
            .field("context", &self.context)
            .finish()
    }
}

impl SimpleCommunicator {
    pub(crate) fn world(core: CoreRef) -> Self {
        let (rank, size) = {
            let c = core.borrow();
            (c.transport.rank(), c.transport.size())
        };
        Self::from_members(core, (0..size).collect(), rank, 0)
    }

    fn from_members(core: CoreRef, members: Vec<Rank>, me: Rank, context: u16) -> Self {
        let index: HashMap<Rank, CommRank> = members
            .iter()
            .enumerate()
            .map(|(i, &w)| (w, i as CommRank))
            .collect();
        let rank = index.get(&me).copied().unwrap_or(-1);
        SimpleCommunicator {
            core,
            members: Rc::new(members),
            index: Rc::new(index),
            rank,
            context,
            coll_seq: Rc::new(Cell::new(0)),
        }
    }

    /// Take the next collective sequence number.
    pub(crate) fn next_coll_seq(&self) -> u32 {
        let s = self.coll_seq.get();
        self.coll_seq.set(s.wrapping_add(1));
        s
    }

    /// This process's rank.
    pub fn rank(&self) -> CommRank {
        self.rank
    }

    /// The number of processes.
    pub fn size(&self) -> CommRank {
        self.members.len() as CommRank
    }

    /// The group of the communicator (`MPI_Comm_group`).
    pub fn group(&self) -> Group {
        Group {
            members: self.members.as_ref().clone(),
            me: self.members[self.rank.max(0) as usize],
        }
    }

    /// The world rank of `r`.
    pub(crate) fn world_rank(&self, r: CommRank) -> Result<Rank> {
        usize::try_from(r)
            .ok()
            .and_then(|i| self.members.get(i).copied())
            .ok_or(Error::Rank {
                rank: i64::from(r),
                size: self.members.len(),
            })
    }

    /// The rank in this communicator of world rank `w` (-1 if not a member).
    pub(crate) fn comm_rank(&self, w: Rank) -> CommRank {
        self.index.get(&w).copied().unwrap_or(-1)
    }

    /// Match bits of `tag` on this communicator's point-to-point (or collective) context.
    pub(crate) fn bits(&self, tag: u32, collective: bool) -> u64 {
        MatchBits::of(self.context + u16::from(collective), tag)
    }

    /// How this communicator relates to `other` (`MPI_Comm_compare`).
    pub fn compare(&self, other: &SimpleCommunicator) -> CommunicatorRelation {
        if self.context == other.context && self.members == other.members {
            CommunicatorRelation::Identical
        } else if self.members == other.members {
            CommunicatorRelation::Congruent
        } else {
            let mut a = self.members.as_ref().clone();
            let mut b = other.members.as_ref().clone();
            a.sort_unstable();
            b.sort_unstable();
            if a == b {
                CommunicatorRelation::Similar
            } else {
                CommunicatorRelation::Unequal
            }
        }
    }

    /// A fresh context id agreed by every process of this communicator: the largest next-free
    /// id of any of them (an allreduce), so no process has used it yet.
    fn agree_context(&self) -> Result<u16> {
        let mine = self.core.borrow().next_context;
        let all = self.all_gather_bytes(&mine.to_le_bytes())?;
        let ctx = vec_from_bytes::<u16>(&all)
            .into_iter()
            .max()
            .unwrap_or(mine);
        if ctx >= u16::MAX - 2 {
            return Err(Error::Transport(
                "out of communicator context ids (MPI_ERR_INTERN)".into(),
            ));
        }
        self.core.borrow_mut().next_context = ctx + 2;
        Ok(ctx)
    }

    /// A new communicator with the same group and a new context (`MPI_Comm_dup`). Collective.
    pub fn duplicate(&self) -> Result<SimpleCommunicator> {
        let ctx = self.agree_context()?;
        let me = self.members[self.rank as usize];
        Ok(Self::from_members(
            self.core.clone(),
            self.members.as_ref().clone(),
            me,
            ctx,
        ))
    }

    /// Split by `color` (`None` = `MPI_UNDEFINED`: no new communicator for this process),
    /// ranks ordered by this process's rank (`MPI_Comm_split`). Collective.
    pub fn split_by_color(&self, color: Option<i32>) -> Result<Option<SimpleCommunicator>> {
        self.split_by_color_with_key(color, self.rank)
    }

    /// Split by `color`, ranks ordered by `key` then old rank. Collective.
    pub fn split_by_color_with_key(
        &self,
        color: Option<i32>,
        key: i32,
    ) -> Result<Option<SimpleCommunicator>> {
        let mine: [i64; 2] = [color.map_or(i64::MIN, i64::from), i64::from(key)];
        let all = vec_from_bytes::<i64>(
            &self.all_gather_bytes(zerocopy::IntoBytes::as_bytes(&mine[..]))?,
        );
        let ctx = self.agree_context()?;
        let Some(c) = color else {
            return Ok(None);
        };
        let mut chosen: Vec<(i64, CommRank)> = (0..self.size())
            .filter(|&r| all[2 * r as usize] == i64::from(c))
            .map(|r| (all[2 * r as usize + 1], r))
            .collect();
        chosen.sort_unstable();
        let members = chosen
            .iter()
            .map(|&(_, r)| self.members[r as usize])
            .collect();
        let me = self.members[self.rank as usize];
        Ok(Some(Self::from_members(
            self.core.clone(),
            members,
            me,
            ctx,
        )))
    }

    /// The communicator of the processes of `group` (`MPI_Comm_create`): collective over this
    /// communicator; `None` for processes outside the group.
    pub fn split_by_subgroup(&self, group: &Group) -> Result<Option<SimpleCommunicator>> {
        let ctx = self.agree_context()?;
        let me = self.members[self.rank as usize];
        if !group.members.contains(&me) {
            return Ok(None);
        }
        Ok(Some(Self::from_members(
            self.core.clone(),
            group.members.clone(),
            me,
            ctx,
        )))
    }
}
