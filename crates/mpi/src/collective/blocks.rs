//! The byte layout of collective buffers: equal lengths where the operation needs them, and
//! the packed blocks of the varcount forms.

use transport::error::{Error, Result};

/// `MPI_ERR_COUNT` unless the two byte lengths of `what` agree.
pub(super) fn same_len(what: &str, a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(Error::Count(format!("{what}: {a} bytes against {b}")));
    }
    Ok(())
}

/// Offsets of packed varcount blocks: chunk `i` is `counts[i]` elements of `elem` bytes.
pub(super) fn packed_bounds(counts: &[usize], elem: usize) -> Vec<(usize, usize)> {
    let mut off = 0;
    counts
        .iter()
        .map(|&c| {
            let b = (off, c * elem);
            off += c * elem;
            b
        })
        .collect()
}
