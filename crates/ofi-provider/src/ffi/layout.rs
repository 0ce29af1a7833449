//! Structure layouts across the libfabric versions the provider serves (1.17 to 2.5,
//! `super::version`).
//!
//! The bindings in `super::types` are the 1.17 layouts. Comparing them with the headers of
//! libfabric v2.5.1 (`include/rdma/fabric.h`, `fi_domain.h`, `fi_eq.h`, `fi_endpoint.h`,
//! `fi_tagged.h`, `fi_cm.h`, `providers/fi_prov.h`; `git diff v1.17.0 v2.5.1` of
//! ofiwg/libfabric), every structure the provider reads or hands out is unchanged except:
//!
//! | structure | change | since | what the provider does |
//! |---|---|---|---|
//! | `fi_domain_attr` | `max_ep_auth_key` (size_t), `max_group_id` (u32) appended; `data_progress` became a union with `progress` (same offset) | 1.20, 2.0 | allocates [`DomainAttr2_5`] (below) |
//! | `fi_domain_attr` | `max_cntr_value`, `max_err_cntr_value` (u64) appended | 2.5 | the same; left 0 |
//! | `fi_cq_err_entry` | `src_addr` (fi_addr_t) appended | 1.20 | never written: the 1.20+ `fi_cq_readerr` wrapper sets it to `FI_ADDR_NOTAVAIL` "for compatibility with older providers" (fi_eq.h) |
//! | `fi_ops_av` | `insert_auth_key`, `lookup_auth_key`, `set_user_id` appended | 1.20, 2.0 | the table's `size` is 1.17's, so the wrappers' `FI_CHECK_OP` return `-FI_ENOSYS` |
//! | `fi_mr_attr` | `mr_iov` became a union with `dmabuf`; `hmem_data`, `page_size`, `base_mr`, `sub_mr_cnt` appended | 1.18 .. 2.0 | (no memory registration here) |
//!
//! `fi_info`, `fi_tx_attr`, `fi_rx_attr` (`total_buffered_recv` kept, unused since 2.0),
//! `fi_ep_attr`, `fi_fabric_attr`, `fi_provider`, the `fid_*` objects and the other
//! operation tables keep their 1.17 layouts.
//!
//! **Who allocates what.** The hints, the application's `fi_info` passed to `fi_domain` /
//! `fi_endpoint`, and the CQ error entries are allocated by the application or the core
//! with the *loader's* sizes: the provider reads and writes only their 1.17 prefix, which
//! every version in range has. The `fi_info` list `getinfo` returns is allocated by the
//! provider and later copied (`fi_dupinfo`: `mem_dup(…, sizeof(*attr))` of each attribute)
//! and freed (`fi_freeinfo`: `free` of each) by the loader's core, which copies *its*
//! `sizeof`: a 2.5 core copies 224 bytes of `fi_domain_attr`, 32 more than 1.17's. So each
//! attribute is allocated with the largest size in range plus [`SPARE`] zeroed bytes (a
//! newer core that appends again reads zeros, "unspecified", instead of past the end).

use std::mem::size_of;

use super::types::*;

/// `struct fi_domain_attr` of libfabric 2.5: 1.17's followed by the fields appended since.
/// Only its size is used (allocations); the provider leaves the new fields zero.
#[repr(C)]
pub struct DomainAttr2_5 {
    /// The 1.17 fields.
    pub base: fi_domain_attr,
    /// 1.20.
    pub max_ep_auth_key: usize,
    /// 2.0.
    pub max_group_id: u32,
    /// 2.5.
    pub max_cntr_value: u64,
    /// 2.5.
    pub max_err_cntr_value: u64,
}

/// `struct fi_cq_err_entry` of libfabric 1.20 and later (only for the layout check: the
/// provider never writes `src_addr`).
#[repr(C)]
pub struct CqErrEntry1_20 {
    /// The 1.17 fields.
    pub base: fi_cq_err_entry,
    /// 1.20.
    pub src_addr: fi_addr_t,
}

/// Zeroed bytes allocated after each attribute structure of a returned `fi_info`.
pub const SPARE: usize = 64;

/// Bytes to allocate for each attribute structure of a returned `fi_info`: the largest
/// layout in range plus [`SPARE`].
pub const TX_ATTR_BYTES: usize = size_of::<fi_tx_attr>() + SPARE;
/// See [`TX_ATTR_BYTES`].
pub const RX_ATTR_BYTES: usize = size_of::<fi_rx_attr>() + SPARE;
/// See [`TX_ATTR_BYTES`].
pub const EP_ATTR_BYTES: usize = size_of::<fi_ep_attr>() + SPARE;
/// See [`TX_ATTR_BYTES`].
pub const DOMAIN_ATTR_BYTES: usize = size_of::<DomainAttr2_5>() + SPARE;
/// See [`TX_ATTR_BYTES`].
pub const FABRIC_ATTR_BYTES: usize = size_of::<fi_fabric_attr>() + SPARE;
/// The `fi_info` itself (the core's `fi_dupinfo` copies `sizeof(struct fi_info)`).
pub const INFO_BYTES: usize = size_of::<fi_info>() + SPARE;

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;

    /// Offsets and sizes worked out by hand from the v2.5.1 header text (x86-64 LP64:
    /// pointers and size_t 8 bytes, enums and int 4, u64 aligned to 8); the 1.17 part is
    /// checked against gcc by `tests/ofi.rs::layouts_match_the_c_headers`.
    #[test]
    fn the_2_5_additions_sit_where_the_2_5_headers_put_them() {
        assert_eq!(size_of::<fi_domain_attr>(), 192);
        assert_eq!(offset_of!(DomainAttr2_5, max_ep_auth_key), 192);
        assert_eq!(offset_of!(DomainAttr2_5, max_group_id), 200);
        assert_eq!(offset_of!(DomainAttr2_5, max_cntr_value), 208);
        assert_eq!(offset_of!(DomainAttr2_5, max_err_cntr_value), 216);
        assert_eq!(size_of::<DomainAttr2_5>(), 224);
        assert_eq!(size_of::<fi_cq_err_entry>(), 80);
        assert_eq!(offset_of!(CqErrEntry1_20, src_addr), 80);
        assert_eq!(size_of::<CqErrEntry1_20>(), 88);
    }
}
