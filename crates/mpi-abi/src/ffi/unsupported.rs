//! Calls of the standard this library declares but does not implement: each answers
//! `MPI_ERR_UNSUPPORTED_OPERATION` through the error handler of its communicator (or of
//! `MPI_COMM_SELF`), with a message naming the call.

use std::ffi::c_int;

use crate::consts::{Handle, MPI_COMM_SELF};
use crate::error::AbiError;
use crate::state::{Eh, call};

fn unsupported(name: &str, comm: Handle) -> c_int {
    call(name, Eh::Comm(comm), |_| Err(AbiError::unsupported(name)))
}

macro_rules! unsupported {
    ($($name:ident($comm:tt, $($arg:ident),*));* $(;)?) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($($arg: usize),*) -> c_int {
            let _ = ($($arg),*);
            unsupported(stringify!($name), unsupported!(@comm $comm))
        }
    )*};
    (@comm self) => { MPI_COMM_SELF };
    (@comm $c:ident) => { $c };
}

// Every argument is passed as a pointer-sized integer: ints and pointers alike arrive in
// integer registers on the supported (LP64) targets, and none of them is looked at.
unsupported! {
    MPI_Comm_idup(comm, comm, newcomm, request);
    MPI_Comm_spawn(comm, command, argv, maxprocs, info, root, comm, intercomm, errcodes);
    MPI_Intercomm_create(local_comm, local_comm, local_leader, peer_comm, remote_leader, tag, newcomm);
    MPI_Cart_create(comm_old, comm_old, ndims, dims, periods, reorder, comm_cart);
    MPI_Dims_create(self, nnodes, ndims, dims);
    MPI_Win_allocate_shared(comm, size, disp_unit, info, comm, baseptr, win);
    MPI_File_open(comm, comm, filename, amode, info, fh);
    MPI_Session_init(self, info, errhandler, session);
}

// The other calls of the standard ABI (MPI-5.0), exported so that programs compiled against a
// standard-ABI header link and learn at run time which call is missing. They take no
// arguments here: an exported C function that ignores its arguments is called correctly
// with any (the caller passes and cleans them up). The tools interface (`MPI_T_*`) answers
// `MPI_T_ERR_NOT_SUPPORTED` without error handlers, as its calls do.
macro_rules! not_implemented {
    ($($name:ident)*) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $name() -> c_int {
            unsupported(stringify!($name), MPI_COMM_SELF)
        }
    )*};
}

macro_rules! tools_not_implemented {
    ($($name:ident)*) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $name() -> c_int {
            MPI_T_ERR_NOT_SUPPORTED
        }
    )*};
}

/// `MPI_T_ERR_NOT_SUPPORTED`.
const MPI_T_ERR_NOT_SUPPORTED: c_int = 1004;
not_implemented! {
    MPI_Abi_get_fortran_booleans MPI_Abi_get_fortran_info MPI_Abi_get_info
    MPI_Abi_set_fortran_booleans MPI_Abi_set_fortran_info MPI_Accumulate_c MPI_Add_error_class
    MPI_Add_error_code MPI_Add_error_string MPI_Allgather_c MPI_Allgather_init
    MPI_Allgather_init_c MPI_Allgatherv_c MPI_Allgatherv_init MPI_Allgatherv_init_c
    MPI_Allreduce_c MPI_Allreduce_init MPI_Allreduce_init_c MPI_Alltoall_c
    MPI_Alltoall_init MPI_Alltoall_init_c MPI_Alltoallv_c MPI_Alltoallv_init
    MPI_Alltoallv_init_c MPI_Alltoallw_c MPI_Alltoallw_init MPI_Alltoallw_init_c MPI_Attr_delete
    MPI_Attr_get MPI_Attr_put MPI_Barrier_init MPI_Bcast_c MPI_Bcast_init MPI_Bcast_init_c
    MPI_Bsend_c MPI_Bsend_init_c MPI_Buffer_attach_c MPI_Buffer_detach_c MPI_Buffer_flush
    MPI_Buffer_iflush MPI_Cart_coords MPI_Cart_get MPI_Cart_map MPI_Cart_rank MPI_Cart_shift
    MPI_Cart_sub MPI_Cartdim_get MPI_Close_port MPI_Comm_accept MPI_Comm_attach_buffer
    MPI_Comm_attach_buffer_c MPI_Comm_connect MPI_Comm_create_from_group MPI_Comm_create_group
    MPI_Comm_detach_buffer MPI_Comm_detach_buffer_c MPI_Comm_disconnect MPI_Comm_flush_buffer
    MPI_Comm_get_info MPI_Comm_get_parent MPI_Comm_idup_with_info MPI_Comm_iflush_buffer
    MPI_Comm_join MPI_Comm_remote_group MPI_Comm_remote_size MPI_Comm_set_info
    MPI_Comm_spawn_multiple MPI_Dist_graph_create MPI_Dist_graph_create_adjacent
    MPI_Dist_graph_neighbors MPI_Dist_graph_neighbors_count MPI_Exscan_c MPI_Exscan_init
    MPI_Exscan_init_c MPI_File_call_errhandler MPI_File_close MPI_File_create_errhandler
    MPI_File_delete MPI_File_get_amode MPI_File_get_atomicity MPI_File_get_byte_offset
    MPI_File_get_errhandler MPI_File_get_group MPI_File_get_info MPI_File_get_position
    MPI_File_get_position_shared MPI_File_get_size MPI_File_get_type_extent
    MPI_File_get_type_extent_c MPI_File_get_view MPI_File_iread MPI_File_iread_all
    MPI_File_iread_all_c MPI_File_iread_at MPI_File_iread_at_all MPI_File_iread_at_all_c
    MPI_File_iread_at_c MPI_File_iread_c MPI_File_iread_shared MPI_File_iread_shared_c
    MPI_File_iwrite MPI_File_iwrite_all MPI_File_iwrite_all_c MPI_File_iwrite_at
    MPI_File_iwrite_at_all MPI_File_iwrite_at_all_c MPI_File_iwrite_at_c MPI_File_iwrite_c
    MPI_File_iwrite_shared MPI_File_iwrite_shared_c MPI_File_preallocate MPI_File_read
    MPI_File_read_all MPI_File_read_all_begin MPI_File_read_all_begin_c MPI_File_read_all_c
    MPI_File_read_all_end MPI_File_read_at MPI_File_read_at_all MPI_File_read_at_all_begin
    MPI_File_read_at_all_begin_c MPI_File_read_at_all_c MPI_File_read_at_all_end
    MPI_File_read_at_c MPI_File_read_c MPI_File_read_ordered MPI_File_read_ordered_begin
    MPI_File_read_ordered_begin_c MPI_File_read_ordered_c MPI_File_read_ordered_end
    MPI_File_read_shared MPI_File_read_shared_c MPI_File_seek MPI_File_seek_shared
    MPI_File_set_atomicity MPI_File_set_errhandler MPI_File_set_info MPI_File_set_size
    MPI_File_set_view MPI_File_sync MPI_File_write MPI_File_write_all MPI_File_write_all_begin
    MPI_File_write_all_begin_c MPI_File_write_all_c MPI_File_write_all_end MPI_File_write_at
    MPI_File_write_at_all MPI_File_write_at_all_begin MPI_File_write_at_all_begin_c
    MPI_File_write_at_all_c MPI_File_write_at_all_end MPI_File_write_at_c MPI_File_write_c
    MPI_File_write_ordered MPI_File_write_ordered_begin MPI_File_write_ordered_begin_c
    MPI_File_write_ordered_c MPI_File_write_ordered_end MPI_File_write_shared
    MPI_File_write_shared_c MPI_Gather_c MPI_Gather_init MPI_Gather_init_c
    MPI_Gatherv_c MPI_Gatherv_init MPI_Gatherv_init_c MPI_Get_accumulate_c MPI_Get_c
    MPI_Get_count_c MPI_Get_elements_c MPI_Get_elements_x MPI_Get_hw_resource_info
    MPI_Graph_create MPI_Graph_get MPI_Graph_map MPI_Graph_neighbors MPI_Graph_neighbors_count
    MPI_Graphdims_get MPI_Grequest_complete MPI_Grequest_start MPI_Group_compare
    MPI_Group_difference MPI_Group_from_session_pset MPI_Group_intersection MPI_Group_range_excl
    MPI_Group_range_incl MPI_Group_union MPI_Iallgather_c MPI_Iallgatherv_c MPI_Iallreduce_c
    MPI_Ialltoall_c MPI_Ialltoallv_c MPI_Ialltoallw_c MPI_Ibcast_c MPI_Ibsend_c MPI_Iexscan_c
    MPI_Igather_c MPI_Igatherv_c MPI_Imrecv_c MPI_Ineighbor_allgather MPI_Ineighbor_allgather_c
    MPI_Ineighbor_allgatherv MPI_Ineighbor_allgatherv_c MPI_Ineighbor_alltoall
    MPI_Ineighbor_alltoall_c MPI_Ineighbor_alltoallv MPI_Ineighbor_alltoallv_c
    MPI_Ineighbor_alltoallw MPI_Ineighbor_alltoallw_c MPI_Info_create_env MPI_Info_get
    MPI_Info_get_valuelen MPI_Intercomm_create_from_groups MPI_Intercomm_merge MPI_Irecv_c
    MPI_Ireduce_c MPI_Ireduce_scatter_block_c MPI_Ireduce_scatter_c MPI_Irsend_c MPI_Iscan_c
    MPI_Iscatter_c MPI_Iscatterv_c MPI_Isend_c MPI_Isendrecv MPI_Isendrecv_c
    MPI_Isendrecv_replace MPI_Isendrecv_replace_c MPI_Issend_c MPI_Keyval_create MPI_Keyval_free
    MPI_Lookup_name MPI_Mrecv_c MPI_Neighbor_allgather MPI_Neighbor_allgather_c
    MPI_Neighbor_allgather_init MPI_Neighbor_allgather_init_c MPI_Neighbor_allgatherv
    MPI_Neighbor_allgatherv_c MPI_Neighbor_allgatherv_init MPI_Neighbor_allgatherv_init_c
    MPI_Neighbor_alltoall MPI_Neighbor_alltoall_c MPI_Neighbor_alltoall_init
    MPI_Neighbor_alltoall_init_c MPI_Neighbor_alltoallv MPI_Neighbor_alltoallv_c
    MPI_Neighbor_alltoallv_init MPI_Neighbor_alltoallv_init_c MPI_Neighbor_alltoallw
    MPI_Neighbor_alltoallw_c MPI_Neighbor_alltoallw_init MPI_Neighbor_alltoallw_init_c
    MPI_Op_create_c MPI_Open_port MPI_Pack_c MPI_Pack_external MPI_Pack_external_c
    MPI_Pack_external_size MPI_Pack_external_size_c MPI_Pack_size_c MPI_Parrived MPI_Pcontrol
    MPI_Pready MPI_Pready_list MPI_Pready_range MPI_Precv_init MPI_Precv_init_c MPI_Psend_init
    MPI_Psend_init_c MPI_Publish_name MPI_Put_c MPI_Raccumulate_c MPI_Recv_c MPI_Recv_init_c
    MPI_Reduce_c MPI_Reduce_init MPI_Reduce_init_c MPI_Reduce_local MPI_Reduce_local_c
    MPI_Reduce_scatter_block_c MPI_Reduce_scatter_block_init MPI_Reduce_scatter_block_init_c
    MPI_Reduce_scatter_c MPI_Reduce_scatter_init MPI_Reduce_scatter_init_c MPI_Register_datarep
    MPI_Register_datarep_c MPI_Remove_error_class MPI_Remove_error_code MPI_Remove_error_string
    MPI_Request_get_status_all MPI_Request_get_status_any MPI_Request_get_status_some
    MPI_Rget_accumulate MPI_Rget_accumulate_c MPI_Rget_c MPI_Rput_c MPI_Rsend_c MPI_Rsend_init_c
    MPI_Scan_c MPI_Scan_init MPI_Scan_init_c MPI_Scatter_c MPI_Scatter_init MPI_Scatter_init_c
    MPI_Scatterv_c MPI_Scatterv_init MPI_Scatterv_init_c MPI_Send_c MPI_Send_init_c
    MPI_Sendrecv_c MPI_Sendrecv_replace_c MPI_Session_attach_buffer MPI_Session_attach_buffer_c
    MPI_Session_call_errhandler MPI_Session_create_errhandler MPI_Session_detach_buffer
    MPI_Session_detach_buffer_c MPI_Session_finalize MPI_Session_flush_buffer
    MPI_Session_get_errhandler MPI_Session_get_info MPI_Session_get_nth_pset
    MPI_Session_get_num_psets MPI_Session_get_pset_info MPI_Session_iflush_buffer
    MPI_Session_set_errhandler MPI_Ssend_c MPI_Ssend_init_c MPI_Status_get_error
    MPI_Status_get_source MPI_Status_get_tag MPI_Status_set_elements_c MPI_Status_set_elements_x
    MPI_Topo_test MPI_Type_contiguous_c MPI_Type_create_darray MPI_Type_create_darray_c
    MPI_Type_create_hindexed_block_c MPI_Type_create_hindexed_c MPI_Type_create_hvector_c
    MPI_Type_create_indexed_block_c MPI_Type_create_keyval MPI_Type_create_resized_c
    MPI_Type_create_struct_c MPI_Type_create_subarray MPI_Type_create_subarray_c
    MPI_Type_delete_attr MPI_Type_free_keyval MPI_Type_get_attr MPI_Type_get_contents
    MPI_Type_get_contents_c MPI_Type_get_envelope MPI_Type_get_envelope_c MPI_Type_get_extent_c
    MPI_Type_get_extent_x MPI_Type_get_true_extent_c MPI_Type_get_true_extent_x
    MPI_Type_get_value_index MPI_Type_indexed_c MPI_Type_match_size MPI_Type_set_attr
    MPI_Type_size_c MPI_Type_size_x MPI_Type_vector_c MPI_Unpack_c MPI_Unpack_external
    MPI_Unpack_external_c MPI_Unpublish_name MPI_Win_allocate_c MPI_Win_allocate_shared_c
    MPI_Win_call_errhandler MPI_Win_create_c MPI_Win_create_keyval
    MPI_Win_delete_attr MPI_Win_free_keyval MPI_Win_get_info MPI_Win_get_name
    MPI_Win_set_attr MPI_Win_set_info MPI_Win_set_name MPI_Win_shared_query
    MPI_Win_shared_query_c
}

tools_not_implemented! {
    MPI_T_category_changed MPI_T_category_get_categories MPI_T_category_get_cvars
    MPI_T_category_get_events MPI_T_category_get_index MPI_T_category_get_info
    MPI_T_category_get_num MPI_T_category_get_num_events MPI_T_category_get_pvars
    MPI_T_cvar_get_index MPI_T_cvar_get_info MPI_T_cvar_get_num MPI_T_cvar_handle_alloc
    MPI_T_cvar_handle_free MPI_T_cvar_read MPI_T_cvar_write MPI_T_enum_get_info
    MPI_T_enum_get_item MPI_T_event_callback_get_info MPI_T_event_callback_set_info
    MPI_T_event_copy MPI_T_event_get_index MPI_T_event_get_info MPI_T_event_get_num
    MPI_T_event_get_source MPI_T_event_get_timestamp MPI_T_event_handle_alloc
    MPI_T_event_handle_free MPI_T_event_handle_get_info MPI_T_event_handle_set_info
    MPI_T_event_read MPI_T_event_register_callback MPI_T_event_set_dropped_handler
    MPI_T_finalize MPI_T_init_thread MPI_T_pvar_get_index MPI_T_pvar_get_info MPI_T_pvar_get_num
    MPI_T_pvar_handle_alloc MPI_T_pvar_handle_free MPI_T_pvar_read MPI_T_pvar_readreset
    MPI_T_pvar_reset MPI_T_pvar_session_create MPI_T_pvar_session_free MPI_T_pvar_start
    MPI_T_pvar_stop MPI_T_pvar_write MPI_T_source_get_info MPI_T_source_get_num
    MPI_T_source_get_timestamp
}
