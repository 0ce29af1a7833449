//! MPICH's `PMI_process_mapping`: which ranks share a node.

/// This rank's `(local size, local index)` from a `PMI_process_mapping` value, or `None` if
/// the value does not parse or does not place the job's ranks.
///
/// The format (MPICH's): `(vector,(start,nodes,ranks_per_node),…)`: each block puts
/// `ranks_per_node` consecutive ranks on each of the nodes `start .. start+nodes`; the blocks
/// repeat until every rank is placed. `(vector,(0,1,4))` is four ranks on one node.
pub fn local_of(mapping: &str, rank: u32, size: u32) -> Option<(u32, u32)> {
    let s: String = mapping.chars().filter(|c| !c.is_whitespace()).collect();
    let inner = s.strip_prefix("(vector,")?.strip_suffix(')')?;
    let mut blocks = Vec::new();
    for part in inner.split("),") {
        let part = part.strip_prefix('(')?;
        let part = part.strip_suffix(')').unwrap_or(part);
        let nums: Vec<u32> = part
            .split(',')
            .map(|n| n.parse().ok())
            .collect::<Option<_>>()?;
        let [start, nodes, per] = nums[..] else {
            return None;
        };
        // The last node of a block must be a node number.
        if per != 0 {
            start.checked_add(nodes)?;
        }
        blocks.push((u64::from(start), u64::from(nodes), u64::from(per)));
    }
    // Ranks one round of the blocks places; the rounds repeat until `size` are placed. Counted
    // rather than laid out rank by rank: `size` comes from the launcher and may be huge.
    let round = blocks
        .iter()
        .try_fold(0u64, |sum, &(_, n, p)| sum.checked_add(n * p))?;
    if round == 0 || rank >= size {
        return None;
    }
    let within = u64::from(rank) % round;
    let mut first = 0u64;
    let mut mine = None;
    for &(start, nodes, per) in &blocks {
        if within < first + nodes * per {
            mine = Some(start + (within - first) / per);
            break;
        }
        first += nodes * per;
    }
    let mine = mine?;
    // Ranks below `end` that sit on `mine`.
    let on_mine = |end: u64| -> u64 {
        let (full, rest) = (end / round, end % round);
        let mut count = 0u64;
        let mut first = 0u64;
        for &(start, nodes, per) in &blocks {
            if (start..start + nodes).contains(&mine) {
                let at = first + (mine - start) * per;
                count += full * per + rest.saturating_sub(at).min(per);
            }
            first += nodes * per;
        }
        count
    };
    Some((
        u32::try_from(on_mine(u64::from(size))).ok()?,
        u32::try_from(on_mine(u64::from(rank))).ok()?,
    ))
}
