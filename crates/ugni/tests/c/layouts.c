/*
 * The sizes and field offsets of gni_pub.h's structures as the C compiler lays them out,
 * one "name value" per line, for tests/c_api.rs to compare with the library's view.
 */
#include <gni_pub.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(t) printf(#t " %zu\n", sizeof(t))
#define OFF(t, f) printf(#t "." #f " %zu\n", offsetof(t, f))

int main(void)
{
	SIZE(gni_mem_handle_t);
	SIZE(gni_smsg_attr_t);
	OFF(gni_smsg_attr_t, msg_buffer);
	OFF(gni_smsg_attr_t, buff_size);
	OFF(gni_smsg_attr_t, mem_hndl);
	OFF(gni_smsg_attr_t, mbox_offset);
	OFF(gni_smsg_attr_t, mbox_maxcredit);
	OFF(gni_smsg_attr_t, msg_maxsize);
	SIZE(gni_post_descriptor_t);
	OFF(gni_post_descriptor_t, post_id);
	OFF(gni_post_descriptor_t, status);
	OFF(gni_post_descriptor_t, cq_mode_complete);
	OFF(gni_post_descriptor_t, type);
	OFF(gni_post_descriptor_t, cq_mode);
	OFF(gni_post_descriptor_t, dlvr_mode);
	OFF(gni_post_descriptor_t, local_addr);
	OFF(gni_post_descriptor_t, local_mem_hndl);
	OFF(gni_post_descriptor_t, remote_addr);
	OFF(gni_post_descriptor_t, remote_mem_hndl);
	OFF(gni_post_descriptor_t, length);
	OFF(gni_post_descriptor_t, rdma_mode);
	OFF(gni_post_descriptor_t, src_cq_hndl);
	OFF(gni_post_descriptor_t, sync_flag_value);
	OFF(gni_post_descriptor_t, sync_flag_addr);
	OFF(gni_post_descriptor_t, amo_cmd);
	OFF(gni_post_descriptor_t, first_operand);
	OFF(gni_post_descriptor_t, second_operand);
	OFF(gni_post_descriptor_t, cqwrite_value);
	OFF(gni_post_descriptor_t, ce_cmd);
	OFF(gni_post_descriptor_t, ce_mode);
	OFF(gni_post_descriptor_t, ce_red_id);
	SIZE(gni_job_limits_t);
	OFF(gni_job_limits_t, ntt_size);
	SIZE(gni_ntt_descriptor_t);
	OFF(gni_ntt_descriptor_t, u);
	OFF(gni_ntt_descriptor_t, flags);
	SIZE(gni_version_info_t);
	OFF(gni_version_info_t, kgni_version);
	OFF(gni_version_info_t, kgni_build_string);
	SIZE(gni_dev_res_desc_t);
	SIZE(gni_job_res_desc_t);
	SIZE(gni_msgq_attr_t);
	OFF(gni_msgq_attr_t, rcv_cq_sz);
	SIZE(gni_error_event_t);
	SIZE(gni_cq_entry_t);
	SIZE(gni_return_t);
	return 0;
}
